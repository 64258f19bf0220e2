package pebble

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Pebble v2.1.7 writes the memtables it replayed from the write-ahead logs
// into a table before pebble.Open returns, and when that flush fails (a
// full disk) it reports the error to EventListener.BackgroundError and
// tries again at once, forever: pebble.Open never returns, and the default
// listener logs every attempt (a server restarted on a still-full disk
// logged 2,000 to 3,100 lines a second at 120% CPU). The same holds for any
// flush Open waits for after it (reconcileAck's). Nothing stops that loop from
// outside, so openWatch stops it from inside: the first background error
// before Open returns parks the goroutine that reported it, which keeps
// Pebble from trying again, and Open gives up with an error that says what
// the disk lacks.
//
// The parked goroutine is Pebble's flush, and it holds the database's mutex,
// so the goroutine that waits for the flush, and any other Pebble goroutine
// that needs the mutex, wait with it: none of them writes again, and none of
// them ends before the process does. The database is not closed (that would
// wait for the flush) and the directory lock stays held, since a second
// Open of the directory in this process must not meet a database that is
// half open. `sepp serve` exits at once on the error. The logs are left as
// they were: Pebble deletes a log only after the table it was flushed to is
// recorded in the MANIFEST, so an Open that gave up loses nothing, and the
// next one, on a disk with room, replays them again.

// openWatch is the EventListener of one Open.
type openWatch struct {
	dir    string
	fs     vfs.FS
	logger pebble.Logger

	mu       sync.Mutex
	watching bool          // until Open has opened the store
	err      error         // the first background error while watching
	flush    error         // the error of the last flush while watching, if it failed
	input    uint64        // the bytes that flush took in
	failed   chan struct{} // closed when err is set
}

func newOpenWatch(dir string, fs vfs.FS, logger pebble.Logger) *openWatch {
	return &openWatch{dir: dir, fs: fs, logger: logger, watching: true, failed: make(chan struct{})}
}

// listener is the EventListener Pebble opens with. Once Open has opened the
// store (opened), a background error is logged, as Pebble's default
// listener does.
func (w *openWatch) listener() *pebble.EventListener {
	return &pebble.EventListener{
		FlushEnd: func(info pebble.FlushInfo) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.watching {
				w.flush, w.input = info.Err, info.InputBytes
			}
		},
		BackgroundError: func(err error) {
			w.mu.Lock()
			if !w.watching {
				w.mu.Unlock()
				w.logger.Errorf("background error: %s", err)
				return
			}
			if w.err == nil {
				w.err = err
				close(w.failed)
			}
			w.mu.Unlock()
			select {} // parked for good: see the comment above openWatch
		},
	}
}

// run runs step, a step of Open that can wait for a flush, in a goroutine
// of its own, and returns its error, or the error that made Open give up:
// step is then left waiting, gaveUp is true, and the caller must neither
// close nor release what Pebble holds (the database, the lock, the file
// system).
func (w *openWatch) run(step func() error) (gaveUp bool, err error) {
	done := make(chan error, 1)
	go func() { done <- step() }() // ends with step, or never: see openWatch
	select {
	case err := <-done:
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.err == nil {
			return false, err
		}
		// A goroutine of this database parked before step returned: the
		// database cannot be used, nor closed.
	case <-w.failed:
		w.mu.Lock()
		defer w.mu.Unlock()
	}
	return true, w.gaveUpError()
}

// opened ends the watch: from now on a background error is logged. It
// returns the error that makes Open give up if one came first, as run does.
func (w *openWatch) opened() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watching = false
	if w.err == nil {
		return nil
	}
	return w.gaveUpError()
}

// gaveUpError says why Open gave up, and what to do. w.mu is held.
func (w *openWatch) gaveUpError() error {
	need := uint64(0) // unknown, unless the error is the flush's
	if w.flush != nil && w.flush.Error() == w.err.Error() {
		need = w.input
	}
	switch {
	case isDiskFull(w.err):
		return diskFull(w.dir, w.fs, need, w.err)
	case need > 0:
		return fmt.Errorf("writing the %s it replayed from the write-ahead log into a table failed, which Pebble would retry forever, so the store gave up; nothing was lost (the log is kept until that table is written): fix the disk, then start sepp again: %w", SizeText(need), w.err)
	}
	return fmt.Errorf("a write or read failed while the store opened, so it gave up; nothing was lost: fix the disk, then start sepp again: %w", w.err)
}

// isDiskFull reports whether err is a write refused for want of space.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// diskFull is the error of an Open of dir that ran out of space: how much
// the disk has free and, when need is known (not 0), how much the flush of
// the replayed logs needed (the memtables' bytes: about what the table
// takes).
func diskFull(dir string, fs vfs.FS, need uint64, err error) error {
	free := "how much is free could not be read"
	if u, uerr := fs.GetDiskUsage(dir); uerr == nil {
		free = SizeText(u.AvailBytes) + " free"
	}
	if need == 0 {
		return fmt.Errorf("the disk is full (%s); nothing was lost: free disk space, then start sepp again: %w", free, err)
	}
	return fmt.Errorf("the disk is full (%s): before it serves, the store writes the %s it replayed from the write-ahead log into a table, and needs about that much free; nothing was lost (the log is kept until that table is written): free disk space, then start sepp again: %w",
		free, SizeText(need), err)
}

// SizeText writes a byte count for a person: 812 bytes, 4.0 KiB, 31.5 MiB.
func SizeText(n uint64) string {
	const unit = 1024
	if n < unit {
		return plural(n, "byte")
	}
	f, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if f < unit {
			break
		}
		f, suffix = f/unit, s
	}
	return fmt.Sprintf("%.1f %s", f, suffix)
}

// openError makes an error of Pebble's Open say what it means: a full disk
// (diskFull) or damaged data (corruptionError).
func openError(dir string, fs vfs.FS, err error) error {
	if isDiskFull(err) {
		return diskFull(dir, fs, 0, err)
	}
	return corruptionError(dir, err)
}
