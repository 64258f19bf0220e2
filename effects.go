package sepp

import (
	"context"
	"time"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// EffectState is the answer to a claim of an effect key.
type EffectState string

// The effect states.
const (
	// EffectAcquired: the caller holds the key and runs the effect.
	EffectAcquired EffectState = "acquired"
	// EffectCompleted: the effect already ran; replay its result.
	EffectCompleted EffectState = "completed"
	// EffectInProgress: another holder's lease is live.
	EffectInProgress EffectState = "in_progress"
)

func effectStateFromProto(o seppv1.ClaimOutcome) EffectState {
	switch o {
	case seppv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED:
		return EffectAcquired
	case seppv1.ClaimOutcome_CLAIM_OUTCOME_COMPLETED:
		return EffectCompleted
	}
	return EffectInProgress
}

// ClaimEffectRequest claims an effect key. Most programs use package effect,
// which claims, extends, completes and releases for them.
type ClaimEffectRequest struct {
	// Scope and Key name the effect: 1 to 256 bytes of UTF-8 each.
	Scope, Key string
	// TTL is how long the completed record lives. Zero: 24 h.
	TTL time.Duration
	// Lease is how long the claim holds without an extension. Zero: 30 s.
	Lease time.Duration
	// Wait is how long the server waits for another holder to finish.
	Wait time.Duration
}

// EffectClaim is the answer to ClaimEffect.
type EffectClaim struct {
	State EffectState
	// Token holds the claim (EffectAcquired).
	Token string
	// Result is the stored result (EffectCompleted).
	Result         []byte
	LeaseExpiresAt time.Time
}

// ClaimEffect claims an effect key.
func (c *Client) ClaimEffect(ctx context.Context, req ClaimEffectRequest) (*EffectClaim, error) {
	res, err := c.effects.ClaimEffect(ctx, &seppv1.ClaimEffectRequest{Scope: req.Scope, Key: req.Key,
		TtlMs: req.TTL.Milliseconds(), LeaseMs: req.Lease.Milliseconds(), WaitMs: req.Wait.Milliseconds()})
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	out := &EffectClaim{State: effectStateFromProto(res.GetOutcome()), Token: res.GetToken(), Result: res.GetResult()}
	if res.LeaseExpiresAt != nil {
		out.LeaseExpiresAt = res.LeaseExpiresAt.AsTime()
	}
	return out, nil
}

// CompleteEffect stores the effect's result under the claim's token and
// returns the stored result. After a transport error it is resent: the
// server answers a repeat of a committed completion with success and the
// result that the first call stored.
func (c *Client) CompleteEffect(ctx context.Context, token string, result []byte) ([]byte, error) {
	req := &seppv1.CompleteEffectRequest{Token: token, Result: result}
	var res *seppv1.CompleteEffectResponse
	err := c.resend(ctx, func() (err error) {
		res, err = c.effects.CompleteEffect(ctx, req)
		return fromRPC(ctx, err)
	})
	if err != nil {
		return nil, err
	}
	return res.GetResult(), nil
}

// ReleaseEffect gives the claim up after a failed effect, so a retry can run it.
func (c *Client) ReleaseEffect(ctx context.Context, token string) error {
	_, err := c.effects.ReleaseEffect(ctx, &seppv1.ReleaseEffectRequest{Token: token})
	return fromRPC(ctx, err)
}

// ExtendEffectLease keeps a claim alive for another lease, from now.
func (c *Client) ExtendEffectLease(ctx context.Context, token string, lease time.Duration) (time.Time, error) {
	res, err := c.effects.ExtendEffectLease(ctx, &seppv1.ExtendEffectLeaseRequest{Token: token, LeaseMs: lease.Milliseconds()})
	if err != nil {
		return time.Time{}, fromRPC(ctx, err)
	}
	return res.GetLeaseExpiresAt().AsTime(), nil
}

// EffectRecord is what the server knows of an effect key.
type EffectRecord struct {
	Found       bool
	State       EffectState
	Result      []byte
	CompletedAt time.Time
	ExpiresAt   time.Time
}

// GetEffect reads an effect key without claiming it.
func (c *Client) GetEffect(ctx context.Context, scope, key string) (*EffectRecord, error) {
	res, err := c.effects.GetEffect(ctx, &seppv1.GetEffectRequest{Scope: scope, Key: key})
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	r := &EffectRecord{Found: res.GetFound()}
	if r.Found {
		r.State = effectStateFromProto(res.GetState())
		r.Result = res.GetResult()
		if res.CompletedAt != nil {
			r.CompletedAt = res.CompletedAt.AsTime()
			r.ExpiresAt = res.ExpiresAt.AsTime()
		}
	}
	return r, nil
}
