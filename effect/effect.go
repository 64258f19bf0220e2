// Package effect makes a handler's external effect (a mail, a charge) happen
// once under at-least-once delivery: one call guards one effect with an
// effect key.
//
//	receipt, err := effect.Do(ctx, client, "mail.invoice", "order-9.invoice",
//		effect.Options{TTL: 24 * time.Hour, InFlight: effect.Wait},
//		func(ctx context.Context) ([]byte, error) { return mailer.SendInvoice(ctx, order) })
//
// The first call to claim the key runs fn and stores its result; a later
// call with the same key, from any delivery on any worker, gets that result
// back without running fn. While one holder runs fn, others wait for its
// result (Wait) or get ErrInProgress (Raise), which the worker runtime turns
// into a retry after a short delay.
//
// Name the effect, not the delivery: "order-9.invoice" is the invoice of
// order 9 however many jobs ask for it; a job id is one delivery's identity.
// Any UTF-8 string of 1 to 256 bytes is a key; no character is reserved.
//
// It fails closed: an invalid key, or a server that cannot be reached, is an
// error and fn does not run. Options.FailOpen runs fn unprotected instead,
// and logs and counts every such run (sepp_effect_unprotected_total).
package effect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/sepp-dev/sepp"
)

// Mode says what a call does when another holder is running the effect.
type Mode int

const (
	// Wait waits for the holder: its result when it completes, or the key
	// when it releases it or its lease ends.
	Wait Mode = iota
	// Raise returns ErrInProgress at once.
	Raise
)

// ErrInProgress: another holder is running the effect (Raise mode). The
// worker runtime retries a job that fails with it after a short delay.
var ErrInProgress = sepp.ErrEffectInProgress

// ErrInvalidKey: the scope or key is empty, longer than 256 bytes, or not
// UTF-8. The effect did not run.
var ErrInvalidKey = errors.New("effect: invalid scope or key")

// Options tune Do. The zero value is the default.
type Options struct {
	// TTL is how long the completed record lives: size it to outlast the
	// longest redelivery of any job that may carry this effect. Default 24 h.
	TTL time.Duration
	// Lease is how long a claim holds without an extension; Do extends it
	// every third of it while fn runs. Default 30 s.
	Lease time.Duration
	// InFlight is what to do while another holder runs the effect.
	// Default Wait.
	InFlight Mode
	// WaitTimeout bounds one wait for a holder in Wait mode; Do claims
	// again after it, until ctx ends. Default 30 s.
	WaitTimeout time.Duration
	// FailOpen runs fn unprotected when the server cannot be reached,
	// logging and counting the run. Default false: fail closed.
	FailOpen bool
	// Logger receives the FailOpen warnings. Default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = 24 * time.Hour
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// UnprotectedRuns counts the runs of fn without a claim (FailOpen), by
// scope, as sepp_effect_unprotected_total. The package registers it nowhere:
// register it with the registry the application serves, once:
//
//	prometheus.MustRegister(effect.UnprotectedRuns)
var UnprotectedRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "sepp_effect_unprotected_total",
	Help: "Effects run without an effect key because the server could not be reached and FailOpen was set.",
}, []string{"scope"})

// Result says how Do got its result.
type Result struct {
	Value []byte
	// Replayed is true when fn did not run here: the result is the one
	// stored by an earlier run.
	Replayed bool
	// Unprotected is true when fn ran without a claim (FailOpen).
	Unprotected bool
}

// Do runs fn at most once for (scope, key) within the record's TTL and
// returns its result; a repeat returns the stored result without running
// fn. An error from fn releases the claim (so a retry can run it) and is
// returned as is.
//
// When ctx carries a span (a traced handler's), Do runs inside a child span
// sepp.effect <scope> whose sepp.effect.outcome says whether fn ran here,
// was replayed, ran unprotected, or did not run (tracing.go).
func Do(ctx context.Context, c *sepp.Client, scope, key string, opts Options, fn func(ctx context.Context) ([]byte, error)) (*Result, error) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return do(ctx, c, scope, key, opts, fn)
	}
	ctx, span := startEffectSpan(ctx, scope, key)
	ran := false
	res, err := do(ctx, c, scope, key, opts, func(ctx context.Context) ([]byte, error) {
		ran = true
		return fn(ctx)
	})
	endEffectSpan(span, res, ran, err)
	return res, err
}

func do(ctx context.Context, c *sepp.Client, scope, key string, opts Options, fn func(ctx context.Context) ([]byte, error)) (*Result, error) {
	opts = opts.withDefaults()
	if err := checkName("scope", scope); err != nil {
		return nil, err
	}
	if err := checkName("key", key); err != nil {
		return nil, err
	}
	for {
		wait := time.Duration(0)
		if opts.InFlight == Wait {
			wait = opts.WaitTimeout
		}
		claim, err := c.ClaimEffect(ctx, sepp.ClaimEffectRequest{Scope: scope, Key: key, TTL: opts.TTL, Lease: opts.Lease, Wait: wait})
		if err != nil {
			if opts.FailOpen && errors.Is(err, sepp.ErrUnavailable) && ctx.Err() == nil {
				opts.Logger.Warn("effect server unreachable: running the effect UNPROTECTED (FailOpen)",
					"scope", scope, "key", key, "err", err)
				UnprotectedRuns.WithLabelValues(scope).Inc()
				v, ferr := fn(ctx)
				if ferr != nil {
					return nil, ferr
				}
				return &Result{Value: v, Unprotected: true}, nil
			}
			return nil, fmt.Errorf("effect %s/%s not run: %w", scope, key, err)
		}
		switch claim.State {
		case sepp.EffectCompleted:
			return &Result{Value: claim.Result, Replayed: true}, nil
		case sepp.EffectInProgress:
			if opts.InFlight == Raise {
				return nil, &sepp.Error{Code: "aborted", Reason: sepp.ErrEffectInProgress.Error(), Index: -1,
					Message: fmt.Sprintf("effect %s/%s is being run by another holder until %v: retry later", scope, key, claim.LeaseExpiresAt.Format(time.RFC3339Nano))}
			}
			continue // the wait ended with the holder still running: claim again
		}
		return run(ctx, c, claim.Token, opts, fn)
	}
}

// run runs fn under an acquired claim, extending its lease, then completes
// or releases it.
func run(ctx context.Context, c *sepp.Client, token string, opts Options, fn func(ctx context.Context) ([]byte, error)) (*Result, error) {
	fctx, cancel := context.WithCancel(ctx)
	extending := make(chan struct{})
	go func() {
		defer close(extending)
		t := time.NewTicker(max(opts.Lease/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-fctx.Done():
				return
			case <-t.C:
				if _, err := c.ExtendEffectLease(fctx, token, opts.Lease); errors.Is(err, sepp.ErrLeaseLost) {
					return // fn will find out when it completes
				}
			}
		}
	}()
	v, err := fn(fctx)
	cancel()
	<-extending
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	if err != nil {
		if rerr := c.ReleaseEffect(rctx, token); rerr != nil && !errors.Is(rerr, sepp.ErrLeaseLost) {
			return nil, errors.Join(err, fmt.Errorf("release the effect claim: %w", rerr))
		}
		return nil, err
	}
	stored, err := c.CompleteEffect(rctx, token, v)
	if err != nil {
		// The effect ran but its record is not stored (the lease ended, or
		// the server stayed gone through the client's resends): a later
		// claim may run it again.
		return nil, fmt.Errorf("effect ran, but its result could not be recorded: %w", err)
	}
	return &Result{Value: stored}, nil
}

// DoJSON is Do for a result of type T, stored and replayed as JSON.
func DoJSON[T any](ctx context.Context, c *sepp.Client, scope, key string, opts Options, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	res, err := Do(ctx, c, scope, key, opts, func(ctx context.Context) ([]byte, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	})
	if err != nil {
		return zero, err
	}
	var out T
	if err := json.Unmarshal(res.Value, &out); err != nil {
		return zero, fmt.Errorf("effect %s/%s: stored result is not a %T: %w", scope, key, zero, err)
	}
	return out, nil
}

func checkName(field, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: %s is empty; the effect did not run", ErrInvalidKey, field)
	case len(v) > 256:
		return fmt.Errorf("%w: %s is %d bytes, the limit is 256; the effect did not run", ErrInvalidKey, field, len(v))
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8; the effect did not run", ErrInvalidKey, field)
	}
	return nil
}
