package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sepp-dev/sepp/internal/store"
)

// ClaimEffect implements store.Effects. The upsert takes the key when it is
// free, expired, or held under an ended lease; otherwise its WHERE is false,
// no row comes back, and the record is read as it stands. The primary key
// makes concurrent claims on several nodes give one ACQUIRED.
func (s *Store) ClaimEffect(ctx context.Context, p *store.ClaimEffectParams) (*store.EffectClaim, error) {
	now := micros(p.Now)
	var token store.LeaseToken
	rand.Read(token[:])
	expires := now + p.Lease.Microseconds()
	claim := &store.EffectClaim{}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t, err := tx.Exec(ctx, `INSERT INTO sepp_effects (scope, key, state, token, lease_expires_at, ttl)
 VALUES ($1, $2, 3, $3, $4, $5)
 ON CONFLICT (scope, key) DO UPDATE SET state = 3, token = EXCLUDED.token, lease_expires_at = EXCLUDED.lease_expires_at,
   ttl = EXCLUDED.ttl, result = NULL, completed_at = NULL, expires_at = NULL
 WHERE (sepp_effects.state = 2 AND sepp_effects.expires_at <= $6) OR (sepp_effects.state = 3 AND sepp_effects.lease_expires_at <= $6)`,
			p.Scope, []byte(p.Key), token[:], expires, p.TTL.Microseconds(), now)
		if err != nil {
			return err
		}
		if t.RowsAffected() == 1 {
			*claim = store.EffectClaim{State: store.EffectAcquired, Token: token, LeaseExpiresAt: fromMicros(expires)}
			return nil
		}
		var state int16
		var leaseExpires, completedAt *int64
		var result []byte
		if err := tx.QueryRow(ctx, `SELECT state, lease_expires_at, result, completed_at FROM sepp_effects
 WHERE scope = $1 AND key = $2`, p.Scope, []byte(p.Key)).Scan(&state, &leaseExpires, &result, &completedAt); err != nil {
			return err
		}
		if store.EffectState(state) == store.EffectCompleted {
			*claim = store.EffectClaim{State: store.EffectCompleted, Result: result, CompletedAt: fromMicros(*completedAt)}
			return nil
		}
		*claim = store.EffectClaim{State: store.EffectInProgress, LeaseExpiresAt: fromMicros(*leaseExpires)}
		return nil
	})
	if err != nil {
		return nil, translate(ctx, err)
	}
	return claim, nil
}

const effectHeld = `token = $1 AND state = 3 AND lease_expires_at > $2`

// effectExec runs a write fenced by effectHeld; with announce set it tells
// the other nodes, in the same transaction, that the effect is done.
func (s *Store) effectExec(ctx context.Context, announce bool, query string, args ...any) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t, err := tx.Exec(ctx, query, args...)
		if err != nil {
			return err
		}
		if t.RowsAffected() == 0 {
			return store.ErrLeaseLost
		}
		if announce {
			_, err = tx.Exec(ctx, `SELECT pg_notify($1, '')`, effectsChannel)
		}
		return err
	})
	if errors.Is(err, store.ErrLeaseLost) {
		return err
	}
	return translate(ctx, err)
}

// CompleteEffect implements store.Effects. The token stays on the completed
// record, so a retried completion can be told from a stale one.
func (s *Store) CompleteEffect(ctx context.Context, p *store.CompleteEffectParams) (*store.CompletedEffect, error) {
	now := micros(p.Now)
	var out *store.CompletedEffect
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var expiresAt, completedAt int64
		err := tx.QueryRow(ctx, `UPDATE sepp_effects SET state = 2, result = $3, completed_at = $2, expires_at = $2 + ttl,
 lease_expires_at = NULL WHERE `+effectHeld+` RETURNING expires_at`, p.Token[:], now, p.Result).Scan(&expiresAt)
		if err == nil {
			out = &store.CompletedEffect{Result: p.Result, CompletedAt: fromMicros(now), ExpiresAt: fromMicros(expiresAt)}
			_, err = tx.Exec(ctx, `SELECT pg_notify($1, '')`, effectsChannel)
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		out = &store.CompletedEffect{AlreadyCompleted: true}
		err = tx.QueryRow(ctx, `SELECT result, completed_at, expires_at FROM sepp_effects
 WHERE token = $1 AND state = 2 AND expires_at > $2`, p.Token[:], now).Scan(&out.Result, &completedAt, &expiresAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrLeaseLost
		}
		out.CompletedAt, out.ExpiresAt = fromMicros(completedAt), fromMicros(expiresAt)
		return err
	})
	if errors.Is(err, store.ErrLeaseLost) {
		return nil, err
	}
	if err != nil {
		return nil, translate(ctx, err)
	}
	return out, nil
}

// ReleaseEffect implements store.Effects.
func (s *Store) ReleaseEffect(ctx context.Context, p *store.ReleaseEffectParams) error {
	return s.effectExec(ctx, true, `DELETE FROM sepp_effects WHERE `+effectHeld, p.Token[:], micros(p.Now))
}

// ExtendEffectLease implements store.Effects.
func (s *Store) ExtendEffectLease(ctx context.Context, p *store.ExtendEffectLeaseParams) (time.Time, error) {
	now := micros(p.Now)
	expires := now + p.Lease.Microseconds()
	if err := s.effectExec(ctx, false, `UPDATE sepp_effects SET lease_expires_at = $3 WHERE `+effectHeld, p.Token[:], now, expires); err != nil {
		return time.Time{}, err
	}
	return fromMicros(expires), nil
}

// GetEffect implements store.Effects.
func (s *Store) GetEffect(ctx context.Context, p *store.GetEffectParams) (*store.Effect, error) {
	now := micros(p.Now)
	e := store.Effect{Scope: p.Scope, Key: p.Key}
	var state int16
	var leaseExpires, completedAt, expiresAt *int64
	err := s.pool.QueryRow(ctx, `SELECT state, result, lease_expires_at, completed_at, expires_at FROM sepp_effects
 WHERE scope = $1 AND key = $2 AND ((state = 2 AND expires_at > $3) OR (state = 3 AND lease_expires_at > $3))`,
		p.Scope, []byte(p.Key), now).Scan(&state, &e.Result, &leaseExpires, &completedAt, &expiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrEffectNotFound
	}
	if err != nil {
		return nil, translate(ctx, err)
	}
	e.State = store.EffectState(state)
	if leaseExpires != nil {
		e.LeaseExpiresAt = fromMicros(*leaseExpires)
	}
	if completedAt != nil {
		e.CompletedAt, e.ExpiresAt = fromMicros(*completedAt), fromMicros(*expiresAt)
	}
	return &e, nil
}
