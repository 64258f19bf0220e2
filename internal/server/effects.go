package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/wakeup"
)

// Effect defaults and bounds, documented in docs/effects.md (The wire API).
const (
	maxEffectNameBytes = 256
	defaultEffectTTL   = 24 * time.Hour
	defaultEffectLease = 30 * time.Second
	maxEffectWait      = 5 * time.Minute
)

// effectService implements EffectService for both stacks.
type effectService struct {
	seppv1.UnimplementedEffectServiceServer
	s *Server
}

// checkEffectName applies the one rule on scopes and keys: 1 to 256 bytes
// of UTF-8. No character is reserved.
func checkEffectName(field, v string) *apiError {
	switch {
	case v == "":
		return invalidField(field, "is empty: name the effect, e.g. scope \"mail.invoice\", key \"order-9.invoice\"; the effect does not run")
	case len(v) > maxEffectNameBytes:
		return invalidField(field, "is %d bytes; the limit is %d: use a shorter, stable name of the effect; the effect does not run", len(v), maxEffectNameBytes)
	case !utf8.ValidString(v):
		return invalidField(field, "is not valid UTF-8")
	}
	return nil
}

// effectWaitPrefix starts every effect's wake-up key; no queue name holds
// a NUL, so these keys never meet a queue's.
const effectWaitPrefix = "effect\x00"

// effectWaitKey names the wake-up key of one effect key.
func effectWaitKey(scope, key string) string {
	return fmt.Sprintf(effectWaitPrefix+"%d\x00%s\x00%s", len(scope), scope, key)
}

func (e *effectService) ClaimEffect(ctx context.Context, req *seppv1.ClaimEffectRequest) (*seppv1.ClaimEffectResponse, error) {
	s := e.s
	if aerr := checkEffectName("scope", req.GetScope()); aerr != nil {
		return nil, aerr
	}
	if aerr := checkEffectName("key", req.GetKey()); aerr != nil {
		return nil, aerr
	}
	ttl, aerr := msOr("ttl_ms", req.GetTtlMs(), defaultEffectTTL, defaultEffectTTL.String())
	if aerr != nil {
		return nil, aerr
	}
	lease, aerr := msOr("lease_ms", req.GetLeaseMs(), defaultEffectLease, defaultEffectLease.String())
	if aerr != nil {
		return nil, aerr
	}
	wait, done, aerr := s.longPoll(ctx, req.GetWaitMs(), maxEffectWait) // limits.go
	if aerr != nil {
		return nil, aerr
	}
	defer done()
	// Wait for the holder to complete or release (a notification), or its
	// lease to end, or our wait to end.
	var c *store.EffectClaim
	_, err := s.wake.Wait(ctx, []string{effectWaitKey(req.GetScope(), req.GetKey())},
		wakeup.WaitOptions{Deadline: s.local.Now().Add(wait)},
		func() (bool, time.Duration, error) {
			now := s.now()
			var err error
			c, err = s.store.ClaimEffect(ctx, &store.ClaimEffectParams{
				Scope: req.GetScope(), Key: req.GetKey(), TTL: ttl, Lease: lease, Now: now,
			})
			if err != nil {
				return true, 0, err
			}
			return c.State != store.EffectInProgress, max(c.LeaseExpiresAt.Sub(now), time.Millisecond), nil
		})
	if err != nil {
		return nil, err
	}
	s.metrics.effectClaims.WithLabelValues(outcomeName(c.State)).Inc()
	return claimResponse(c), nil
}

func outcomeName(st store.EffectState) string {
	switch st {
	case store.EffectAcquired:
		return "acquired"
	case store.EffectCompleted:
		return "completed"
	}
	return "in_progress"
}

func claimResponse(c *store.EffectClaim) *seppv1.ClaimEffectResponse {
	res := &seppv1.ClaimEffectResponse{Outcome: seppv1.ClaimOutcome(c.State), Result: c.Result}
	if c.State == store.EffectAcquired {
		res.Token = hex.EncodeToString(c.Token[:])
	}
	if !c.LeaseExpiresAt.IsZero() {
		res.LeaseExpiresAt = timestamppb.New(c.LeaseExpiresAt)
	}
	return res
}

// msOr reads a *_ms field: 0 means def, negative or beyond what a duration
// holds (about 292 years) is an error rather than a value that wraps around.
// zero says what 0 means, for the error's message, since def may be a
// placeholder (0 for "the queue's lease", which the store decides).
func msOr(field string, ms int64, def time.Duration, zero string) (time.Duration, *apiError) {
	switch {
	case ms < 0 || ms > config.MaxMs:
		return 0, invalidField(field, "must be between 0 and %d (0: %s), got %d", config.MaxMs, zero, ms)
	case ms == 0:
		return def, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func parseEffectToken(token string) (store.LeaseToken, *apiError) {
	var t store.LeaseToken
	if len(token) != 2*len(t) {
		return t, invalidField("token", "must be the %d-character token ClaimEffect returned", 2*len(t))
	}
	if _, err := hex.Decode(t[:], []byte(token)); err != nil {
		return t, invalidField("token", "must be the token ClaimEffect returned: %v", err)
	}
	return t, nil
}

// effectDone wakes claims waiting on the effect the token held. The store
// does not say which key a token held, so every effect waiter re-checks;
// they are few and a re-check is one read.
func (s *Server) effectDone() { s.wake.NotifyPrefix(effectWaitPrefix) }

func (e *effectService) CompleteEffect(ctx context.Context, req *seppv1.CompleteEffectRequest) (*seppv1.CompleteEffectResponse, error) {
	token, aerr := parseEffectToken(req.GetToken())
	if aerr != nil {
		return nil, aerr
	}
	if n, max := len(req.GetResult()), e.s.cfg.Server.MaxPayloadBytes; int64(n) > max {
		return nil, invalidField("result", "is %d bytes; the limit is %d (max_payload_bytes)", n, max)
	}
	done, err := e.s.store.CompleteEffect(ctx, &store.CompleteEffectParams{Token: token, Result: req.GetResult(), Now: e.s.now()})
	if err != nil {
		return nil, effectLeaseLost(err)
	}
	if !done.AlreadyCompleted {
		e.s.effectDone()
	}
	return &seppv1.CompleteEffectResponse{Result: done.Result, CompletedAt: timestamppb.New(done.CompletedAt),
		AlreadyCompleted: done.AlreadyCompleted}, nil
}

func (e *effectService) ReleaseEffect(ctx context.Context, req *seppv1.ReleaseEffectRequest) (*seppv1.ReleaseEffectResponse, error) {
	token, aerr := parseEffectToken(req.GetToken())
	if aerr != nil {
		return nil, aerr
	}
	if err := e.s.store.ReleaseEffect(ctx, &store.ReleaseEffectParams{Token: token, Now: e.s.now()}); err != nil {
		return nil, effectLeaseLost(err)
	}
	e.s.effectDone()
	return &seppv1.ReleaseEffectResponse{}, nil
}

func (e *effectService) ExtendEffectLease(ctx context.Context, req *seppv1.ExtendEffectLeaseRequest) (*seppv1.ExtendEffectLeaseResponse, error) {
	token, aerr := parseEffectToken(req.GetToken())
	if aerr != nil {
		return nil, aerr
	}
	lease, aerr := msOr("lease_ms", req.GetLeaseMs(), defaultEffectLease, defaultEffectLease.String())
	if aerr != nil {
		return nil, aerr
	}
	until, err := e.s.store.ExtendEffectLease(ctx, &store.ExtendEffectLeaseParams{Token: token, Lease: lease, Now: e.s.now()})
	if err != nil {
		return nil, effectLeaseLost(err)
	}
	return &seppv1.ExtendEffectLeaseResponse{LeaseExpiresAt: timestamppb.New(until)}, nil
}

func (e *effectService) GetEffect(ctx context.Context, req *seppv1.GetEffectRequest) (*seppv1.GetEffectResponse, error) {
	if aerr := checkEffectName("scope", req.GetScope()); aerr != nil {
		return nil, aerr
	}
	if aerr := checkEffectName("key", req.GetKey()); aerr != nil {
		return nil, aerr
	}
	ef, err := e.s.store.GetEffect(ctx, &store.GetEffectParams{Scope: req.GetScope(), Key: req.GetKey(), Now: e.s.now()})
	if errors.Is(err, store.ErrEffectNotFound) {
		return &seppv1.GetEffectResponse{Found: false}, nil
	}
	if err != nil {
		return nil, err
	}
	res := &seppv1.GetEffectResponse{Found: true, State: seppv1.ClaimOutcome(ef.State), Result: ef.Result}
	if !ef.CompletedAt.IsZero() {
		res.CompletedAt = timestamppb.New(ef.CompletedAt)
		res.ExpiresAt = timestamppb.New(ef.ExpiresAt)
	}
	return res, nil
}

func effectLeaseLost(err error) error {
	if errors.Is(err, store.ErrLeaseLost) {
		return newError(codeOf("failed_precondition"), ReasonLeaseLost,
			"this effect token no longer holds the key (its lease ended and another claim may hold it, or it was completed or released): do not report this run's outcome")
	}
	return err
}
