package pebble

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sepp-dev/sepp/internal/store"
)

// BackupDir is the folder of the data directory that backups are made in
// (store.Backuper). Pebble and Open's log scan read only the files at the
// top of the data directory, so a copy there is never taken for the
// store's own files; and it is on the same file system, so the copy's
// tables are hard links to the live ones.
const BackupDir = "backups"

var _ store.Backuper = (*Store)(nil)

// BackupRoot implements store.Backuper.
func (s *Store) BackupRoot() string { return filepath.Join(s.opts.Path, BackupDir) }

// Backup implements store.Backuper: a Pebble checkpoint of the database
// under BackupRoot, with an acknowledgement mark that says what the
// checkpoint holds, so the copy opens with no loss reported.
func (s *Store) Backup(ctx context.Context, p *store.BackupParams) (*store.BackupCopy, error) {
	if p.ID == "" || p.ID == "." || p.ID == ".." || strings.ContainsAny(p.ID, `/\`) {
		return nil, fmt.Errorf("pebble: backup id %q is not a folder name", p.ID)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.BackupRoot(), 0o755); err != nil {
		return nil, fmt.Errorf("pebble: create %s: %w", s.BackupRoot(), err)
	}
	dir := filepath.Join(s.BackupRoot(), p.ID)
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("pebble: backup folder %s exists already: choose another id", dir)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("pebble: backup folder %s: %w", dir, err)
	}
	c, err := s.backup(dir, p)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return c, nil
}

func (s *Store) backup(dir string, p *store.BackupParams) (*store.BackupCopy, error) {
	acked, err := s.checkpoint(dir)
	if err != nil {
		return nil, fmt.Errorf("pebble: checkpoint into %s: %w", dir, err)
	}
	if err := trimNewestLog(dir); err != nil {
		return nil, fmt.Errorf("pebble: the copy's newest write-ahead log in %s: %w", dir, err)
	}
	c, held, err := describeCopy(dir, p.Now.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("pebble: read the copy in %s: %w", dir, err)
	}
	// The mark must say what the copy holds: a mark ahead of it would be
	// reported as lost acknowledged commits when the copy is restored, one
	// behind it would hide a loss after the restore.
	if held != acked {
		return nil, fmt.Errorf("pebble: the copy in %s holds %d commits, the store had made %d when it was taken; the copy is not consistent and was removed", dir, held.commits, acked.commits)
	}
	if err := writeAckMarkFile(dir, held); err != nil {
		return nil, fmt.Errorf("pebble: write the copy's acknowledgement mark: %w", err)
	}
	if c.Files, err = store.ListBackupFiles(dir); err != nil {
		return nil, fmt.Errorf("pebble: list the copy's files: %w", err)
	}
	return c, nil
}

// checkpoint makes the Pebble checkpoint while no group is applied, and
// returns the count of the last group applied before it. Holding writeMu
// keeps the write-ahead log still while Pebble copies it, so the copy of
// its newest log ends at a whole record: a record being written as it was
// copied would open as a torn tail, reported as damage. Writes wait the
// moment it takes (the tables are hard links; the logs and the MANIFEST
// are copied). writeMu is taken before s.mu, as commitNow does.
func (s *Store) checkpoint(dir string) (ackCount, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var acked ackCount
	err := s.read(func(db *pebble.DB) error {
		acked = s.acked
		// The flushed log holds every group applied, synced or not yet.
		return db.Checkpoint(dir, pebble.WithFlushedWAL())
	})
	return acked, err
}

// trimNewestLog cuts the copy's newest log after its last whole record.
// Pebble reuses old log files: the live log, which has no end-of-log
// trailer until it is closed, may be followed in its file by the records of
// the log the file held before, and the log scan at open (scanWAL) reads
// those as a damaged record. The writer was held while the log was copied
// (checkpoint), so nothing after its last whole record was written for
// this log. Were a damaged record in the middle of the live log cut here
// with the commits after it, the copy would hold fewer commits than the
// store had made, and backup refuses it.
func trimNewestLog(dir string) error {
	wals, err := listWALs(dir)
	if err != nil || len(wals) == 0 {
		return err
	}
	w := wals[len(wals)-1]
	path := filepath.Join(dir, w.name)
	end, clean, err := wholeRecordsEnd(path, w.num)
	if err != nil || clean {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(end)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// wholeRecordsEnd reads the log at path and returns the offset after its
// last whole record, and whether the log ends there cleanly.
func wholeRecordsEnd(path string, num uint64) (end int64, clean bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	rr, err := newRecordReader(f, num)
	if err != nil {
		return 0, false, err
	}
	for {
		r, err := rr.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		switch {
		case err == nil:
			end = rr.Offset()
		case errors.Is(err, io.EOF):
			return end, true, nil
		default:
			return end, false, nil
		}
	}
}

// describeCopy opens the checkpoint in dir read-only (replaying its log in
// memory, writing nothing but Pebble's lock file, which it removes) and
// reads what the manifest says of it.
func describeCopy(dir string, now int64) (*store.BackupCopy, ackCount, error) {
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: quietLogger{}})
	if err != nil {
		return nil, ackCount{}, err
	}
	c := &store.BackupCopy{Dir: dir}
	held, err := readCopy(db, c, now)
	err = errors.Join(err, db.Close())
	if rerr := os.Remove(filepath.Join(dir, "LOCK")); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return c, held, err
}

func readCopy(db *pebble.DB, c *store.BackupCopy, now int64) (held ackCount, err error) {
	v, ok, err := get(db, schemaKey)
	if err != nil || !ok {
		return held, errors.Join(err, errors.New("the schema version is missing"))
	}
	if c.SchemaVersion, err = strconv.ParseInt(string(v), 10, 64); err != nil {
		return held, fmt.Errorf("schema version %q: %w", v, err)
	}
	if v, ok, err = get(db, ackKey); err != nil {
		return held, err
	}
	if ok {
		if held, ok = decodeAckCount(v); !ok {
			return held, fmt.Errorf("the acknowledged count is %d bytes, want 16 or 24", len(v))
		}
	}
	c.AckedCommits, c.AckedJobs = int64(held.commits), int64(held.jobs)
	c.Queues, err = queueStats(db, now)
	return held, err
}

// LockData takes the lock of the data directory path, as Open does, naming
// the process that holds it when it is taken: sepp restore holds it while it
// moves a data directory aside, so that it never pulls one from under a
// running server. Close releases it.
func LockData(path string) (io.Closer, error) {
	lock, err := pebble.LockDirectory(path, vfs.Default)
	if err != nil {
		return nil, lockedError(path, err)
	}
	return lock, nil
}
