//go:build seppfaults

// The fault campaign's hooks (test/faults/campaign), compiled only into a
// build with -tags seppfaults; release builds have none of this.
//
//   - SEPP_FAULT_CLOCK_FILE names a file holding a clock offset in
//     milliseconds, read every 50 ms: the node's wall clock (the clock the
//     embedded store uses, and the host clock a PostgreSQL node compares
//     with the database's) runs that far off, as a host with a wrong clock
//     would.
//   - SEPP_FAULT_BROKEN=ack-before-commit answers Complete before the
//     completion is written (it is written 500 ms later, unless the process
//     dies first): the bug the campaign must catch.

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

func init() {
	if path := os.Getenv("SEPP_FAULT_CLOCK_FILE"); path != "" {
		var offset atomic.Int64 // milliseconds
		read := func() {
			b, err := os.ReadFile(path)
			if err != nil {
				return
			}
			if ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
				offset.Store(ms)
			}
		}
		read()
		go func() { // lives as long as the process
			for range time.Tick(50 * time.Millisecond) {
				read()
			}
		}()
		host := wallClock
		wallClock = func() time.Time { return host().Add(time.Duration(offset.Load()) * time.Millisecond) }
	}
	switch b := os.Getenv("SEPP_FAULT_BROKEN"); b {
	case "":
	case "ack-before-commit":
		fmt.Fprintln(os.Stderr, "sepp: DELIBERATELY BROKEN BUILD (SEPP_FAULT_BROKEN=ack-before-commit): Complete answers before it commits")
		wrapStoreForFaults = func(st store.Store) store.Store { return ackEarly{st} }
	default:
		fmt.Fprintf(os.Stderr, "sepp: SEPP_FAULT_BROKEN=%q: the one deliberate bug is ack-before-commit\n", b)
		os.Exit(2)
	}
}

// ackEarly acknowledges every completion at once and writes it 500 ms
// later: a crash in between loses completions the workers were told of.
type ackEarly struct{ store.Store }

// Unwrap lets store.As find the wrapped store's optional interfaces
// (PostgreSQL's Notifier, for its wake-ups across nodes).
func (a ackEarly) Unwrap() store.Store { return a.Store }

func (a ackEarly) Complete(_ context.Context, p *store.CompleteParams) ([]store.CompleteResult, error) {
	later := *p
	later.Jobs = append([]store.CompletedJob(nil), p.Jobs...)
	go func() {
		time.Sleep(500 * time.Millisecond)
		later.Now = later.Now.Add(500 * time.Millisecond)
		_, _ = a.Store.Complete(context.Background(), &later)
	}()
	return make([]store.CompleteResult, len(p.Jobs)), nil
}
