package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

func claim(t *testing.T, s store.Store, now time.Time, key string) *store.EffectClaim {
	t.Helper()
	c, err := s.ClaimEffect(context.Background(), &store.ClaimEffectParams{Scope: "mail.invoice", Key: key, TTL: time.Hour, Lease: lease, Now: now})
	if err != nil {
		t.Fatalf("ClaimEffect: %v", err)
	}
	return c
}

func testEffectClaimCompleteReplay(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := claim(t, s, t0, "order-9:invoice")
	if a.State != store.EffectAcquired {
		t.Fatalf("first claim: %+v", a)
	}
	if b := claim(t, s, t0.Add(time.Second), "order-9:invoice"); b.State != store.EffectInProgress || !b.LeaseExpiresAt.Equal(t0.Add(lease)) {
		t.Fatalf("claim while held: %+v", b)
	}
	if _, err := s.CompleteEffect(ctx, &store.CompleteEffectParams{Token: a.Token, Result: []byte("em_1"), Now: t0.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	c := claim(t, s, t0.Add(3*time.Second), "order-9:invoice")
	if c.State != store.EffectCompleted || string(c.Result) != "em_1" || !c.CompletedAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("claim after completion: %+v", c)
	}
	e, err := s.GetEffect(ctx, &store.GetEffectParams{Scope: "mail.invoice", Key: "order-9:invoice", Now: t0.Add(3 * time.Second)})
	if err != nil || e.State != store.EffectCompleted || !e.ExpiresAt.Equal(t0.Add(2*time.Second+time.Hour)) {
		t.Fatalf("GetEffect: %+v %v", e, err)
	}
	// The record lives TTL from completion; then the key is free again.
	if d := claim(t, s, t0.Add(2*time.Second+time.Hour), "order-9:invoice"); d.State != store.EffectAcquired {
		t.Fatalf("claim after the TTL: %+v", d)
	}
	if _, err := s.CompleteEffect(ctx, &store.CompleteEffectParams{Token: a.Token, Now: t0}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("second CompleteEffect with a spent token: %v", err)
	}
}

func testEffectReleaseAndLeaseExpiry(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := claim(t, s, t0, "k")
	if err := s.ReleaseEffect(ctx, &store.ReleaseEffectParams{Token: a.Token, Now: t0}); err != nil {
		t.Fatal(err)
	}
	b := claim(t, s, t0, "k")
	if b.State != store.EffectAcquired || b.Token == a.Token {
		t.Fatalf("claim after release: %+v", b)
	}
	until, err := s.ExtendEffectLease(ctx, &store.ExtendEffectLeaseParams{Token: b.Token, Lease: lease, Now: t0.Add(20 * time.Second)})
	if err != nil || !until.Equal(t0.Add(50*time.Second)) {
		t.Fatalf("extend: %v %v", until, err)
	}
	if c := claim(t, s, t0.Add(40*time.Second), "k"); c.State != store.EffectInProgress {
		t.Fatalf("claim inside the extended lease: %+v", c)
	}
	// The holder crashes: its lease ends and the next claim acquires.
	c := claim(t, s, t0.Add(50*time.Second), "k")
	if c.State != store.EffectAcquired {
		t.Fatalf("claim after the lease ended: %+v", c)
	}
	if _, err := s.CompleteEffect(ctx, &store.CompleteEffectParams{Token: b.Token, Now: t0.Add(51 * time.Second)}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("CompleteEffect with the old token: %v", err)
	}
	if err := s.ReleaseEffect(ctx, &store.ReleaseEffectParams{Token: b.Token, Now: t0.Add(51 * time.Second)}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("ReleaseEffect with the old token: %v", err)
	}
	if _, err := s.CompleteEffect(ctx, &store.CompleteEffectParams{Token: c.Token, Result: []byte("ok"), Now: t0.Add(52 * time.Second)}); err != nil {
		t.Fatal(err)
	}
}

func testEffectConcurrentClaims(t *testing.T, s store.Store) {
	const n = 32
	var wg sync.WaitGroup
	states := make([]store.EffectState, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.ClaimEffect(context.Background(), &store.ClaimEffectParams{Scope: "s", Key: "one", TTL: time.Hour, Lease: lease, Now: t0})
			if err != nil {
				t.Error(err)
				return
			}
			states[i] = c.State
		}()
	}
	wg.Wait()
	acquired := 0
	for _, st := range states {
		if st == store.EffectAcquired {
			acquired++
		} else if st != store.EffectInProgress {
			t.Fatalf("state %v", st)
		}
	}
	if acquired != 1 {
		t.Fatalf("%d of %d concurrent claims acquired the key, want 1", acquired, n)
	}
}

func testEffectSweep(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := claim(t, s, t0, "k")
	if _, err := s.CompleteEffect(ctx, &store.CompleteEffectParams{Token: a.Token, Now: t0}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Sweep(ctx, &store.SweepParams{Now: t0.Add(time.Hour), Limit: 10, CompletedRetention: day, DeadRetention: day})
	if err != nil || res.Effects != 1 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	if _, err := s.GetEffect(ctx, &store.GetEffectParams{Scope: "mail.invoice", Key: "k", Now: t0}); !errors.Is(err, store.ErrEffectNotFound) {
		t.Fatalf("effect after the sweep: %v", err)
	}
}
