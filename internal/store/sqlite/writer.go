package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/sepp-dev/sepp/internal/store"
)

// writeOp is one write submitted to the writer goroutine: an enqueue batch
// (enqueue set), which the writer merges with the other enqueues of its group,
// or any other write (apply set). Both must be re-runnable: if any operation
// of a group fails with a database error the whole group is rolled back and
// every operation runs again in a transaction of its own, so one bad
// operation cannot fail its neighbours.
type writeOp struct {
	apply   func(ctx context.Context, tx *sql.Tx) error
	enqueue *enqueueOp
	err     error
	done    chan struct{}
}

func (op *writeOp) jobs() int {
	if op.enqueue == nil {
		return 0
	}
	return len(op.enqueue.jobs)
}

// submit hands an operation to the writer and waits until it is committed
// (durable) or failed. If ctx ends first submit returns ctx.Err(); the
// operation may still be committed after that, which is safe for keyed
// enqueues: the caller retries with the same key.
func (s *Store) submit(ctx context.Context, apply func(ctx context.Context, tx *sql.Tx) error) error {
	return s.submitOp(ctx, &writeOp{apply: apply, done: make(chan struct{})})
}

func (s *Store) submitOp(ctx context.Context, op *writeOp) error {
	select {
	case <-s.stop:
		return store.ErrClosed
	default:
	}
	select {
	case s.ops <- op:
	case <-s.stop:
		return store.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writer is the only goroutine that writes. It is started by Open and stops
// when Close closes s.stop, after committing every operation already queued.
func (s *Store) writer() {
	defer close(s.stopped)
	group := make([]*writeOp, 0, s.opts.MaxGroupOps)
	for {
		var first *writeOp
		select {
		case first = <-s.ops:
		case <-s.stop:
			// Drain what was submitted before Close, then fail nothing: every
			// queued op is committed.
			for {
				select {
				case op := <-s.ops:
					s.commit([]*writeOp{op})
				default:
					return
				}
			}
		}
		group = append(group[:0], first)
	drain:
		for len(group) < s.opts.MaxGroupOps {
			select {
			case op := <-s.ops:
				group = append(group, op)
			default:
				break drain
			}
		}
		s.commit(group)
	}
}

// commit runs group in one transaction and answers every operation.
func (s *Store) commit(group []*writeOp) {
	start := time.Now()
	err := s.runGroup(group)
	if err != nil && len(group) > 1 {
		// Isolate the failure: each op alone.
		for _, op := range group {
			if err := s.runGroup([]*writeOp{op}); err != nil {
				op.err = err
			}
		}
	} else {
		for _, op := range group {
			if op.err == nil {
				op.err = err
			}
		}
	}
	if s.opts.OnCommit != nil {
		jobs := 0
		for _, op := range group {
			jobs += op.jobs()
		}
		s.opts.OnCommit(len(group), jobs, time.Since(start))
	}
	for _, op := range group {
		close(op.done)
	}
}

// runGroup applies ops in one transaction and commits it. It returns the first
// database error (after rolling back), or the commit's error.
func (s *Store) runGroup(ops []*writeOp) error {
	// The writer's work is not tied to any one caller's context: a caller
	// that gives up must not abort its neighbours' transaction.
	ctx := context.Background()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	for i := 0; i < len(ops); {
		op := ops[i]
		op.err = nil
		if op.enqueue != nil {
			// Consecutive enqueues are decided and written together.
			j := i + 1
			for j < len(ops) && ops[j].enqueue != nil {
				ops[j].err = nil
				j++
			}
			if err := s.applyEnqueues(ctx, tx, ops[i:j]); err != nil {
				tx.Rollback()
				return translate(err)
			}
			i = j
			continue
		}
		i++
		if err := op.apply(ctx, tx); err != nil {
			var le logicalError
			if errors.As(err, &le) {
				// Decided before any write: only this op fails.
				op.err = le.err
				continue
			}
			tx.Rollback()
			return translate(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", translate(err))
	}
	return nil
}

// logicalError wraps an error an operation decided on before writing anything
// (a conflict, a missing record). It fails that operation alone and leaves
// the group's transaction intact.
type logicalError struct{ err error }

func (e logicalError) Error() string { return e.err.Error() }

func (e logicalError) Unwrap() error { return e.err }

// translate is the one place SQLite errors are turned into errors a caller
// can act on.
func translate(err error) error {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code {
	case sqlite3.ErrFull:
		return fmt.Errorf("the disk holding the data directory is full; free space and retry: %w", err)
	case sqlite3.ErrReadonly, sqlite3.ErrPerm, sqlite3.ErrCantOpen:
		return fmt.Errorf("the data directory is not writable; check its permissions: %w", err)
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return fmt.Errorf("the database is locked by another process; run one sepp per data directory: %w", err)
	}
	return err
}
