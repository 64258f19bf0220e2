// Package pebble is Sepp's LSM store: one Pebble database (pure Go, no cgo)
// in a data directory, every commit synced to its write-ahead log before it
// returns.
//
// A write on an idle store is committed on the caller's goroutine
// (commitNow); writes that arrive while one is being applied go to one
// writer goroutine that decides dedup and commits the operations that
// arrived together in one batch (group commit): N concurrent enqueues cost
// one sync, and each caller is answered only after it. Reads go to the database directly and run in parallel with the
// writer. The rules (job preparation, the dedup decision, leases, retention)
// are package storerule's; this package is the key layout (keys.go) and the
// batches.
package pebble

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// Options configure Open.
type Options struct {
	// Path is the data directory; it is created if missing. Required.
	Path string
	// MaxGroupOps bounds how many operations one group commit takes.
	// Default 512.
	MaxGroupOps int
	// MemTableSize is Pebble's memtable size in bytes. Default 32 MiB: on
	// the keyed-enqueue write pattern (1,024 jobs a commit) Pebble's own
	// default of 4 MiB was measured at 21,000 jobs/s, 64 MiB at 70,000; 32
	// MiB keeps 32 producers' keyed enqueues as fast as 64 (suite W1, paired
	// runs: 31,680 and 30,995 against 30,234 and 28,295 calls/s) and a
	// server holding 1,000,000 keys at 113 MiB RSS instead of 170 (W5).
	MemTableSize uint64
	// CacheSize is the block cache in bytes. Default 8 MiB, Pebble's own:
	// Reserve reads the jobs at the head of each queue, a few to a block,
	// and a block read from disk for the first of them serves the rest (W3,
	// 50,000 jobs: 21,079 jobs/s with 8 MiB, 20,658 with 16); more only holds
	// more of the blocks a filter rebuild reads, and costs resident memory: a
	// server holding 1,000,000 keys (W5) measured 133-147 MiB RSS with 8 MiB,
	// 142-161 with 16 and 141-203 with 32. Pebble charges its memtables to
	// the cache it is given, so Open gives it this much more than two
	// memtables (memtableCharge).
	CacheSize int64
	// OnCommit, if set, is called after every group commit, once it is answered,
	// with the number of operations and jobs it carried and its duration.
	OnCommit func(ops, jobs int, d time.Duration)
	// OnKeyReleased, if set, is called once per queue, after
	// a group commit that deleted n dedup records of queue because their
	// jobs reached a final state their release_key_on names has synced; never
	// for a group that failed.
	OnKeyReleased func(queue string, n int)
	// OnFailed, if set, is called once, from the syncer, when a commit
	// could not be made durable (a write-ahead log write or sync failed: a
	// full or failing disk). The store has then stopped: every later call
	// fails with ErrUnavailable, since what the failed commit wrote is
	// visible in memory but not on disk. The caller should stop the
	// process; a restart recovers what was acknowledged.
	OnFailed func(err error)
	// FS is the file system Pebble's files live on. Default: the
	// operating system's. Tests set one that fails writes on demand.
	FS vfs.FS
}

// memtableCharge is how many memtables' worth Open adds to the block cache.
// Pebble reserves each memtable's size in the cache it is given, so a cache
// no larger than one memtable held no block at all once the memtable had
// grown to its full size: every Reserve read its jobs from the files again
// (a W3 run: 206,517 block reads, 0 hits). One memtable is written while the
// one before it is flushed.
const memtableCharge = 2

// Store is the Pebble backend. Create it with Open.
type Store struct {
	opts Options
	db   *pebble.DB
	lock *pebble.Lock // held from Open until Close, released after the database closes
	// fsCloser stops the disk-health check of the file system Open made,
	// after the database closes.
	fsCloser io.Closer
	// onJobs is the callback of Listen while it runs: told, after a commit
	// that made waiting jobs deliverable has synced, their queue.
	onJobs atomic.Pointer[func(queue string)]

	// mu guards closed and db against Close: readers hold it shared while
	// they read; Close takes it exclusively after the writer has stopped.
	mu     sync.RWMutex
	closed bool

	// writeMu is held by whoever applies a group: the writer goroutine, or
	// a caller committing on its own goroutine (commitNow). It guards
	// cursors, horizon, acked and the filter's replacement. answerMu
	// guards marked and the mark file: groups are answered by the syncer
	// and by commitNow callers. Lock order: writeMu, then pendingMu;
	// answerMu, then pendingMu; writeMu and answerMu are never held
	// together.
	writeMu, answerMu sync.Mutex
	ops               chan *writeOp
	stop              chan struct{} // closed by Close: the writer drains and exits
	stopped           chan struct{} // closed by the syncer once the writer has exited and every group is answered
	closeOnce         sync.Once

	cursors cursors // under writeMu
	// horizon is the dedup horizon (storerule.SweepCut): the latest cut a
	// committed sweep deleted dedup records up to. Under writeMu, and kept in
	// memory alone: after a restart no request from before it is still in
	// flight, and a new request's Now is past every cut a sweep made before
	// the restart (a sweep's cut is a minute before its Now), given a clock
	// that does not go back; so it starts at zero.
	horizon int64
	// filter is replaced under writeMu only; nil: every dedup lookup reads.
	filter atomic.Pointer[keyFilter]
	// pending holds the hit counts that enqueueHits answered and the
	// writer has not committed yet, so a lookup counts them at once.
	pendingMu sync.Mutex
	pending   map[pendingHit]int64
	// hitFlushQueued is set while an operation that commits the pending
	// counts waits for the writer (addHits).
	hitFlushQueued atomic.Bool
	// Pebble makes a committed batch visible before its sync returns.
	// unsynced names the dedup records of the commits whose sync has not
	// returned, synced is the number of the last commit that returned, and
	// syncedCh is closed when synced moves on (then replaced): enqueueHits
	// waits with them until what it read is on disk.
	unsynced unsyncedRecords
	// recent holds the dedup records the latest commits wrote (recent.go).
	recent     recentRecords
	synced     atomic.Uint64
	syncedCh   atomic.Pointer[chan struct{}]
	inflightCh chan inflight // applied groups, from the writer to the syncer

	// The acknowledgement mark (ackmark.go): acked is the count the last
	// committed batch carries, marked the one the mark file holds.
	ack           *ackMark
	acked, marked ackCount // acked under writeMu, marked under answerMu, after Open

	recovery   store.Recovery   // what Open replayed and found damaged
	migrations store.Migrations // what Open's migrate applied

	// failed is set by the syncer when a commit could not be made durable;
	// from then on nothing is applied, answered as done or read (fail).
	failed atomic.Pointer[error]
}

var _ store.Store = (*Store)(nil)

// layouts are the versions of the key layout this binary knows; the last is
// the one keys.go describes. A later layout adds a migration here.
// 0002_flow adds per-key flow control (follow-ups, concurrency and rate
// keys and their waiting lists): nothing is rewritten, but a binary that
// knows only 0001 would leave the jobs waiting in those lists waiting, so
// it refuses the store.
var layouts = []storerule.Migration{{Version: 1, Name: "0001_layout"}, {Version: 2, Name: "0002_flow"}}

// Open opens (creating if needed) the database under opts.Path and starts
// the writer goroutine. Close stops it. Pebble locks the directory, so a
// second Open of it, from this process or another, fails.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Path == "" {
		return nil, errors.New("pebble: Options.Path is required")
	}
	if opts.MaxGroupOps <= 0 {
		opts.MaxGroupOps = 512
	}
	if opts.MemTableSize == 0 {
		opts.MemTableSize = 32 << 20
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 8 << 20
	}
	// A directory the SQLite store wrote is not opened as a new, empty
	// Pebble store beside it.
	if err := store.CheckNoSQLite(opts.Path); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Path, 0o755); err != nil {
		return nil, fmt.Errorf("pebble: create data directory: %w", err)
	}
	// The directory is locked before Open, so that a second sepp on it is
	// refused before Pebble starts anything.
	lock, err := pebble.LockDirectory(opts.Path, vfs.Default)
	if err != nil {
		return nil, lockedError(opts.Path, err) // names the holder: holder.go
	}
	// Who holds the lock, for a second server to name (holder.go); the
	// lock itself is what keeps it out, so a failure here is not fatal.
	_ = writeHolder(opts.Path)
	// Pebble's default file system: the OS's, with a disk-health check
	// whose goroutine Pebble stops only when a database that opened is
	// closed. Made here, so that an Open that fails stops it too.
	var fsCloser io.Closer = io.NopCloser(nil) // an FS the caller gave is the caller's
	fs := opts.FS
	if fs == nil {
		fs, fsCloser = vfs.WithDiskHealthChecks(vfs.Default, 5*time.Second, nil, func(vfs.DiskSlowInfo) {})
	}
	release := func() {
		fsCloser.Close()
		lock.Close()
	}
	// Pebble drops a torn record at the end of the newest log silently,
	// and replays the logs it finds without noticing one missing: read
	// them first, and the count the tables hold, so the recovery report
	// can say so.
	scan, err := scanWAL(opts.Path)
	if err != nil {
		release()
		return nil, fmt.Errorf("pebble: read the write-ahead log in %s: %w", opts.Path, err)
	}
	durable, err := durableAck(opts.Path, fs, lock)
	if err != nil {
		release()
		if isDiskFull(err) { // its empty log directory could not be made
			err = diskFull(opts.Path, fs, 0, err)
		}
		return nil, fmt.Errorf("pebble: open %s: %w", opts.Path, err)
	}
	var hole string
	if after, words := findHole(durable, scan.commits); after != "" && scan.uncleanOlder == "" {
		moved, err := setAsideAfterHole(opts.Path, scan.logs, after)
		if err != nil {
			release()
			return nil, fmt.Errorf("pebble: set aside the write-ahead logs after a hole in %s: %w", opts.Path, err)
		}
		hole = words + "; " + moved
		scan.torn = "" // the newest log was set aside with the rest
	}
	logger := &replayLogger{}
	cache := pebble.NewCache(opts.CacheSize + memtableCharge*int64(opts.MemTableSize))
	defer cache.Unref() // the database holds its own reference
	po := &pebble.Options{
		MemTableSize: opts.MemTableSize,
		Cache:        cache,
		Logger:       logger,
		Lock:         lock,
		FS:           fs,
	}
	// Most dedup lookups are of keys that turn out to be new: a Bloom filter
	// on every level answers those without reading a data block. The levels
	// below L0 inherit it.
	po.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	// Pebble writes the logs it replays into a table before it returns, and
	// retries a failed write forever: watch gives up at the first failure
	// instead (diskfull.go). When it does, Pebble's goroutines still hold
	// the lock and the files, so nothing is closed or released.
	watch := newOpenWatch(opts.Path, fs, logger)
	po.EventListener = watch.listener()
	var db *pebble.DB
	gaveUp, err := watch.run(func() (err error) {
		db, err = pebble.Open(opts.Path, po)
		return err
	})
	switch {
	case gaveUp:
		return nil, fmt.Errorf("pebble: open %s: %w", opts.Path, err)
	case err != nil:
		release()
		return nil, fmt.Errorf("pebble: open %s: %w", opts.Path, openError(opts.Path, fs, err))
	}
	s := &Store{
		opts:     opts,
		db:       db,
		lock:     lock,
		fsCloser: fsCloser,
		ops:      make(chan *writeOp, 4*opts.MaxGroupOps),
		stop:     make(chan struct{}),
		stopped:  make(chan struct{}),
		cursors:  cursors{},
		// Groups applied and not yet synced; the writer runs at most this
		// far ahead of the disk.
		inflightCh: make(chan inflight, 16),
	}
	s.pending = map[pendingHit]int64{}
	ch := make(chan struct{})
	s.syncedCh.Store(&ch)
	// Watched too: reconcileAck waits for a flush.
	var f *keyFilter
	var lost string
	gaveUp, err = watch.run(func() (err error) {
		if err := s.migrate(); err != nil {
			return err
		}
		if f, err = buildKeyFilter(db); err != nil {
			return fmt.Errorf("pebble: read the dedup records: %w", corruptionError(opts.Path, err))
		}
		lost, err = s.openAck(hole)
		return err
	})
	if !gaveUp {
		// From here a background error is logged, and parks nothing.
		if perr := watch.opened(); perr != nil {
			gaveUp, err = true, perr
		}
	}
	switch {
	case gaveUp:
		return nil, fmt.Errorf("pebble: open %s: %w", opts.Path, err)
	case err != nil:
		db.Close()
		release()
		return nil, err
	}
	s.recovery.WALFiles, s.recovery.WALKeys, s.recovery.WALBatches = logger.figures()
	s.filter.Store(f)
	s.recovery.DedupRecords = f.added
	torn := scan.torn
	if torn != "" && lost == "" {
		// The mark vouches for every commit the log still holds.
		torn += "; the acknowledgement mark shows that no acknowledged write is missing"
	}
	for _, d := range []string{torn, lost} {
		if d != "" {
			s.recovery.Damaged = append(s.recovery.Damaged, d)
		}
	}
	go s.writer()
	go s.syncer()
	return s, nil
}

// openAck opens the acknowledgement mark and compares it with what the
// database replayed; it returns what was lost, if anything: hole, what the
// log scan found missing between the commits it holds (and set aside after
// it), and what the mark shows missing after what was replayed.
func (s *Store) openAck(hole string) (string, error) {
	m, mark, marked, damaged, err := openAckMark(s.opts.Path)
	if err != nil {
		return "", fmt.Errorf("pebble: open the acknowledgement mark in %s: %w", s.opts.Path, err)
	}
	s.ack = m
	count, lost, err := reconcileAck(s.db, mark, marked)
	if err != nil {
		m.close()
		return "", err
	}
	if !marked && count.commits > 0 && damaged == "" {
		damaged = fmt.Sprintf("the acknowledgement mark %s is missing although the database holds %d commits: whether the write-ahead log lost acknowledged writes cannot be told", AckMarkFile, count.commits)
	}
	s.acked = count
	// The commits the database replayed are on disk: a group that writes
	// nothing is answered at once, not when this process first commits.
	s.synced.Store(count.commits)
	if err := m.write(count); err != nil {
		m.close()
		return "", fmt.Errorf("pebble: write the acknowledgement mark in %s: %w", s.opts.Path, err)
	}
	s.marked = count
	return errorsJoinText(damaged, errorsJoinText(hole, lost)), nil
}

// errorsJoinText joins the non-empty sentences with "; ".
func errorsJoinText(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// migrate records the layout version in a new database and refuses one
// whose version is newer than this binary knows (storerule.Pending).
func (s *Store) migrate() error {
	applied := 0
	v, closer, err := s.db.Get(schemaKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return fmt.Errorf("pebble: read the schema version: %w", err)
	default:
		applied, err = strconv.Atoi(string(v))
		closer.Close()
		if err != nil {
			return fmt.Errorf("pebble: schema version %q: %w", v, err)
		}
	}
	pending, err := storerule.Pending(layouts, applied)
	if err != nil {
		return fmt.Errorf("pebble: %w", err)
	}
	s.migrations = store.Migrations{Known: len(layouts)}
	for _, m := range pending {
		// Version 1 is the layout of an empty database, and 2 only adds
		// keys and fields: nothing to rewrite.
		if err := s.db.Set(schemaKey, []byte(strconv.Itoa(m.Version)), pebble.Sync); err != nil {
			return fmt.Errorf("pebble: migration %s: %w", m.Name, err)
		}
		s.migrations.Applied = append(s.migrations.Applied, m.Name)
	}
	return nil
}

// Migrations implements store.Migrator: the layout versions Open recorded
// (0001_layout and 0002_flow for a new database).
func (s *Store) Migrations() store.Migrations {
	m := s.migrations
	m.Applied = append([]string(nil), m.Applied...)
	return m
}

// SchemaKey is the key that holds the layout version, for tests that make a
// database look as if a newer binary had written it.
func SchemaKey() []byte { return append([]byte(nil), schemaKey...) }

// Close stops the writer after it has committed the operations already
// submitted, then closes the database. Calls after Close fail with
// store.ErrClosed.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		// The hit counts still pending, committed with the rest.
		if s.failure() == nil && s.hitFlushQueued.Load() {
			_ = s.submitOp(context.Background(), s.hitFlush())
		}
		close(s.stop)
		<-s.stopped
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		err = errors.Join(s.db.Close(), s.ack.close(), removeHolder(s.opts.Path), s.fsCloser.Close(), s.lock.Close())
	})
	return err
}

// read runs fn on the database unless the store is closed; Close waits for
// it.
func (s *Store) read(fn func(db *pebble.DB) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	if err := s.failure(); err != nil {
		return err
	}
	return fn(s.db)
}

// get reads one key of r (the database or a batch), copied; ok is false when
// the key is absent.
func get(r pebble.Reader, key []byte) (v []byte, ok bool, err error) {
	val, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v = append([]byte(nil), val...)
	closer.Close()
	return v, true, nil
}

func getJob(r pebble.Reader, id store.JobID) (*record, error) {
	v, ok, err := get(r, jobKey(id))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, store.ErrJobNotFound
	}
	return decodeJob(id, v)
}

func getDedup(r pebble.Reader, queue, key string) (*dedupRecord, error) {
	v, ok, err := get(r, dedupKey(queue, key))
	if err != nil || !ok {
		return nil, err
	}
	d, err := decodeDedup(v)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

func getEffect(r pebble.Reader, scope, key string) (*effectRecord, error) {
	v, ok, err := get(r, effectKey(scope, key))
	if err != nil || !ok {
		return nil, err
	}
	return decodeEffect(v)
}

// quietLogger drops Pebble's informational lines and keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}

func (quietLogger) Errorf(format string, args ...any) { pebble.DefaultLogger.Errorf(format, args...) }

func (quietLogger) Fatalf(format string, args ...any) { pebble.DefaultLogger.Fatalf(format, args...) }

// Ping implements store.Store: it reads the layout version, a key every
// database holds, so a store whose files cannot be read fails it.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.read(func(db *pebble.DB) error {
		_, ok, err := get(db, schemaKey)
		if err != nil {
			return fmt.Errorf("pebble: read the schema version: %w", err)
		}
		if !ok {
			return errors.New("pebble: the schema version is missing")
		}
		return nil
	})
}

var _ store.Notifier = (*Store)(nil)

// Listen implements store.Notifier for the jobs a write makes deliverable
// without enqueueing them (a follow-up whose original ended), which the
// server cannot tell from the call that wrote them: onJobs hears their
// queue once the commit has synced, until ctx ends. Effects are announced
// by the server itself.
func (s *Store) Listen(ctx context.Context, onJobs func(queue string), _ func()) {
	s.onJobs.Store(&onJobs)
	<-ctx.Done()
	s.onJobs.CompareAndSwap(&onJobs, nil)
}
