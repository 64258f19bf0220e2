package pebble

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// ClaimEffect implements store.Effects.
func (s *Store) ClaimEffect(ctx context.Context, p *store.ClaimEffectParams) (*store.EffectClaim, error) {
	now := p.Now.UnixMicro()
	claim := &store.EffectClaim{}
	err := s.submit(ctx, func(t *tx) error {
		old, err := getEffect(t.b, p.Scope, p.Key)
		if err != nil {
			return err
		}
		if old != nil {
			if c, taken := storerule.JudgeClaim(&old.EffectRecord, now); taken {
				*claim = c
				return nil
			}
			// An expired record, or a holder whose lease ended: free.
			if err := t.dropEffect(p.Scope, p.Key, old); err != nil {
				return err
			}
		}
		e := &effectRecord{TTL: p.TTL.Microseconds()}
		e.State = store.EffectInProgress
		rand.Read(e.Token[:])
		e.LeaseExpiresAt = storerule.LeaseEnd(now, p.Lease)
		if err := t.putEffect(p.Scope, p.Key, e); err != nil {
			return err
		}
		if err := t.set(tokenKey(e.Token), effectName(p.Scope, p.Key)); err != nil {
			return err
		}
		*claim = store.EffectClaim{State: store.EffectAcquired, Token: e.Token, LeaseExpiresAt: storerule.FromMicros(e.LeaseExpiresAt)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claim, nil
}

func (t *tx) putEffect(scope, key string, e *effectRecord) error {
	return t.set(effectKey(scope, key), encodeEffect(e))
}

// dropEffect deletes an effect record and its token and expiry entries.
func (t *tx) dropEffect(scope, key string, e *effectRecord) error {
	if err := t.del(effectKey(scope, key)); err != nil {
		return err
	}
	if err := t.del(tokenKey(e.Token)); err != nil {
		return err
	}
	if e.State == store.EffectCompleted {
		return t.del(effectExpKey(e.ExpiresAt, scope, key))
	}
	return nil
}

// byToken finds the effect record token names, if any.
func byToken(t *tx, token store.LeaseToken) (scope, key string, e *effectRecord, err error) {
	name, ok, err := get(t.b, tokenKey(token))
	if err != nil || !ok {
		return "", "", nil, err
	}
	scope, key, ok = splitName(name)
	if !ok {
		return "", "", nil, errCorrupt
	}
	e, err = getEffect(t.b, scope, key)
	if err == nil && e != nil && e.Token != token {
		e = nil
	}
	return scope, key, e, err
}

// CompleteEffect implements store.Effects. The token stays on the completed
// record, so a retried completion can be told from a stale one.
func (s *Store) CompleteEffect(ctx context.Context, p *store.CompleteEffectParams) (*store.CompletedEffect, error) {
	now := p.Now.UnixMicro()
	var out *store.CompletedEffect
	err := s.submit(ctx, func(t *tx) error {
		scope, key, e, err := byToken(t, p.Token)
		if err != nil {
			return err
		}
		switch {
		case e == nil:
			return logicalError{store.ErrLeaseLost}
		case e.Held(p.Token, now):
			e.State, e.Result, e.CompletedAt, e.ExpiresAt, e.LeaseExpiresAt = store.EffectCompleted, p.Result, now, now+e.TTL, 0
			if err := t.putEffect(scope, key, e); err != nil {
				return err
			}
			if err := t.setIndex([]byte{kindEffectExp}, effectExpKey(e.ExpiresAt, scope, key), nil); err != nil {
				return err
			}
			out = &store.CompletedEffect{Result: p.Result, CompletedAt: storerule.FromMicros(now), ExpiresAt: storerule.FromMicros(e.ExpiresAt)}
			return nil
		case e.State == store.EffectCompleted && e.Live(now):
			out = &store.CompletedEffect{AlreadyCompleted: true, Result: e.Result,
				CompletedAt: storerule.FromMicros(e.CompletedAt), ExpiresAt: storerule.FromMicros(e.ExpiresAt)}
			return nil
		}
		return logicalError{store.ErrLeaseLost}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReleaseEffect implements store.Effects.
func (s *Store) ReleaseEffect(ctx context.Context, p *store.ReleaseEffectParams) error {
	return s.submit(ctx, func(t *tx) error {
		scope, key, e, err := byToken(t, p.Token)
		if err != nil {
			return err
		}
		if e == nil || !e.Held(p.Token, p.Now.UnixMicro()) {
			return logicalError{store.ErrLeaseLost}
		}
		return t.dropEffect(scope, key, e)
	})
}

// ExtendEffectLease implements store.Effects.
func (s *Store) ExtendEffectLease(ctx context.Context, p *store.ExtendEffectLeaseParams) (time.Time, error) {
	now := p.Now.UnixMicro()
	expires := storerule.LeaseEnd(now, p.Lease)
	err := s.submit(ctx, func(t *tx) error {
		scope, key, e, err := byToken(t, p.Token)
		if err != nil {
			return err
		}
		if e == nil || !e.Held(p.Token, now) {
			return logicalError{store.ErrLeaseLost}
		}
		e.LeaseExpiresAt = expires
		return t.putEffect(scope, key, e)
	})
	if err != nil {
		return time.Time{}, err
	}
	return storerule.FromMicros(expires), nil
}

// GetEffect implements store.Effects.
func (s *Store) GetEffect(ctx context.Context, p *store.GetEffectParams) (*store.Effect, error) {
	now := p.Now.UnixMicro()
	var out *store.Effect
	err := s.read(func(db *pebble.DB) error {
		e, err := getEffect(db, p.Scope, p.Key)
		if err != nil {
			return err
		}
		if e == nil || !e.Live(now) {
			return store.ErrEffectNotFound
		}
		out = &store.Effect{Scope: p.Scope, Key: p.Key, State: e.State, Result: e.Result}
		if e.State == store.EffectInProgress {
			out.LeaseExpiresAt = storerule.FromMicros(e.LeaseExpiresAt)
		} else {
			out.CompletedAt, out.ExpiresAt = storerule.FromMicros(e.CompletedAt), storerule.FromMicros(e.ExpiresAt)
		}
		return nil
	})
	return out, err
}

// sweepEffects deletes up to limit completed effect records past their TTL.
func sweepEffects(t *tx, now int64, limit int) (int, error) {
	prefix := []byte{kindEffectExp}
	n := 0
	err := t.walk(prefix, upTo(prefix, now), true, func(k, _ []byte) (bool, error) {
		if n == limit {
			return false, nil
		}
		scope, key, ok := splitName(k[9:])
		if !ok {
			return false, errCorrupt
		}
		if err := t.del(k); err != nil {
			return false, err
		}
		t.taken(prefix, k)
		e, err := getEffect(t.b, scope, key)
		if err != nil {
			return false, err
		}
		if e != nil && e.State == store.EffectCompleted && !e.Live(now) {
			if err := t.dropEffect(scope, key, e); err != nil {
				return false, err
			}
			n++
		}
		return true, nil
	})
	return n, err
}
