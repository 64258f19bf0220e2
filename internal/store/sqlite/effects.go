package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// ClaimEffect implements store.Effects.
func (s *Store) ClaimEffect(ctx context.Context, p *store.ClaimEffectParams) (*store.EffectClaim, error) {
	now := p.Now.UnixMicro()
	claim := &store.EffectClaim{}
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var (
			state                     int
			leaseExpires, completedAt sql.NullInt64
			expiresAt                 sql.NullInt64
			result                    []byte
		)
		err := tx.QueryRowContext(ctx, `SELECT state, lease_expires_at, result, completed_at, expires_at
 FROM effects WHERE scope = ? AND key = ?`, p.Scope, []byte(p.Key)).
			Scan(&state, &leaseExpires, &result, &completedAt, &expiresAt)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err == nil {
			switch {
			case store.EffectState(state) == store.EffectCompleted && expiresAt.Int64 > now:
				*claim = store.EffectClaim{State: store.EffectCompleted, Result: result,
					CompletedAt: time.UnixMicro(completedAt.Int64).UTC()}
				return nil
			case store.EffectState(state) == store.EffectInProgress && leaseExpires.Int64 > now:
				*claim = store.EffectClaim{State: store.EffectInProgress, LeaseExpiresAt: time.UnixMicro(leaseExpires.Int64).UTC()}
				return nil
			}
			// An expired record, or a holder whose lease ended: free.
		}
		var token store.LeaseToken
		rand.Read(token[:])
		expires := now + p.Lease.Microseconds()
		if _, err := tx.ExecContext(ctx, `INSERT INTO effects (scope, key, state, token, lease_expires_at, ttl)
 VALUES (?, ?, ?, ?, ?, ?)
 ON CONFLICT (scope, key) DO UPDATE SET state = excluded.state, token = excluded.token,
   lease_expires_at = excluded.lease_expires_at, ttl = excluded.ttl,
   result = NULL, completed_at = NULL, expires_at = NULL`,
			p.Scope, []byte(p.Key), int(store.EffectInProgress), token[:], expires, p.TTL.Microseconds()); err != nil {
			return err
		}
		*claim = store.EffectClaim{State: store.EffectAcquired, Token: token, LeaseExpiresAt: time.UnixMicro(expires).UTC()}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claim, nil
}

// The condition under which a token holds its effect key.
const effectHeld = `token = ? AND state = 3 AND lease_expires_at > ?`

// effectUpdate runs an UPDATE or DELETE whose WHERE starts with effectHeld
// and reports ErrLeaseLost when it matched nothing.
func (s *Store) effectUpdate(ctx context.Context, query string, args ...any) error {
	return s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return logicalError{store.ErrLeaseLost}
		}
		return nil
	})
}

// CompleteEffect implements store.Effects. The token stays on the completed
// record, so a retried completion can be told from a stale one.
func (s *Store) CompleteEffect(ctx context.Context, p *store.CompleteEffectParams) (*store.CompletedEffect, error) {
	now := p.Now.UnixMicro()
	var out *store.CompletedEffect
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var expiresAt int64
		err := tx.QueryRowContext(ctx, `UPDATE effects SET state = 2, result = ?, completed_at = ?, expires_at = ? + ttl,
 lease_expires_at = NULL WHERE `+effectHeld+` RETURNING expires_at`, p.Result, now, now, p.Token[:], now).Scan(&expiresAt)
		if err == nil {
			out = &store.CompletedEffect{Result: p.Result, CompletedAt: time.UnixMicro(now).UTC(), ExpiresAt: time.UnixMicro(expiresAt).UTC()}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var completedAt int64
		out = &store.CompletedEffect{AlreadyCompleted: true}
		err = tx.QueryRowContext(ctx, `SELECT result, completed_at, expires_at FROM effects
 WHERE token = ? AND state = 2 AND expires_at > ?`, p.Token[:], now).Scan(&out.Result, &completedAt, &expiresAt)
		if errors.Is(err, sql.ErrNoRows) {
			return logicalError{store.ErrLeaseLost}
		}
		out.CompletedAt, out.ExpiresAt = time.UnixMicro(completedAt).UTC(), time.UnixMicro(expiresAt).UTC()
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReleaseEffect implements store.Effects.
func (s *Store) ReleaseEffect(ctx context.Context, p *store.ReleaseEffectParams) error {
	return s.effectUpdate(ctx, `DELETE FROM effects WHERE `+effectHeld, p.Token[:], p.Now.UnixMicro())
}

// ExtendEffectLease implements store.Effects.
func (s *Store) ExtendEffectLease(ctx context.Context, p *store.ExtendEffectLeaseParams) (time.Time, error) {
	now := p.Now.UnixMicro()
	expires := now + p.Lease.Microseconds()
	if err := s.effectUpdate(ctx, `UPDATE effects SET lease_expires_at = ? WHERE `+effectHeld, expires, p.Token[:], now); err != nil {
		return time.Time{}, err
	}
	return time.UnixMicro(expires).UTC(), nil
}

// GetEffect implements store.Effects.
func (s *Store) GetEffect(ctx context.Context, p *store.GetEffectParams) (*store.Effect, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	now := p.Now.UnixMicro()
	var (
		state                                int
		leaseExpires, completedAt, expiresAt sql.NullInt64
		e                                    = store.Effect{Scope: p.Scope, Key: p.Key}
	)
	err := s.read.QueryRowContext(ctx, `SELECT state, result, lease_expires_at, completed_at, expires_at FROM effects
 WHERE scope = ? AND key = ? AND ((state = 2 AND expires_at > ?) OR (state = 3 AND lease_expires_at > ?))`,
		p.Scope, []byte(p.Key), now, now).Scan(&state, &e.Result, &leaseExpires, &completedAt, &expiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrEffectNotFound
	}
	if err != nil {
		return nil, err
	}
	e.State = store.EffectState(state)
	if leaseExpires.Valid {
		e.LeaseExpiresAt = time.UnixMicro(leaseExpires.Int64).UTC()
	}
	if completedAt.Valid {
		e.CompletedAt = time.UnixMicro(completedAt.Int64).UTC()
		e.ExpiresAt = time.UnixMicro(expiresAt.Int64).UTC()
	}
	return &e, nil
}

// sweepEffects deletes up to limit completed effect records past their TTL.
func sweepEffects(ctx context.Context, tx *sql.Tx, now int64, limit int) (int, error) {
	r, err := tx.ExecContext(ctx, `DELETE FROM effects WHERE (scope, key) IN
 (SELECT scope, key FROM effects WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?)`, now, limit)
	if err != nil {
		return 0, err
	}
	n, err := r.RowsAffected()
	return int(n), err
}
