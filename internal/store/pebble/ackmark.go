package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The acknowledgement mark lets Open tell a write-ahead log that lost
// acknowledged writes from one that ends cleanly. A log cut exactly at a
// record boundary (a disk or file system that lost a whole synced write)
// reads as if the writes after the cut were never made; nothing in the log
// can say otherwise. So every group commit carries a running count (the
// commit's number and the jobs created up to it) under ackKey in its own
// batch, and after the batch is synced, and before any operation of the
// group is answered, whoever answers the group (the syncer, or the caller
// that committed it with commitNow, under answerMu) records the same count
// in AckMarkFile, a
// small file beside Pebble's with a checksum. The write lands in the page
// cache, where a crash of the process cannot lose it, and a goroutine of
// its own syncs it right after, off the answer path (a second sync before
// each answer would cost every commit one more disk flush: 15-30% of the
// keyed enqueues per second from 32 producers, measured). So after a crash
// of the process the mark holds every acknowledged commit, and after a
// power failure every one up to its last sync, a moment before. At Open, a
// mark ahead of the count the database replayed means the log lost that
// many acknowledged commits, and the recovery report says so, with the
// number of jobs they created. A mark behind it is a crash between the two
// writes: the commits past the mark were never acknowledged.

// AckMarkFile is the name of the acknowledgement mark in the data
// directory.
const AckMarkFile = "sepp-acked"

var ackKey = []byte{kindSchema, 'a'} // beside the schema version, in the same kind

// ackJumpKey is written beside ackKey by the one write that moves the count
// forward by more than one commit: reconcileAck, bringing the database up to
// a mark ahead of it. The log scan at open (scanWAL) takes a batch that holds
// it as a new start, not as a hole.
var ackJumpKey = []byte{kindSchema, 'j'}

const (
	ackMagic = 0x53455041 // "SEPA"
	ackSize  = 4 + 8 + 8 + 4
)

// ackCount is the running count of group commits and of the jobs they
// created.
type ackCount struct{ commits, jobs uint64 }

func (c ackCount) encode(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, c.commits)
	return binary.BigEndian.AppendUint64(b, c.jobs)
}

func decodeAckCount(v []byte) (ackCount, bool) {
	c, _, ok := decodeAckValue(v)
	return c, ok
}

// encodeAckValue is the value of ackKey in a group commit's batch: the
// running count, then the jobs this commit created, so that the log scan at
// open can count the jobs of commits missing between two it holds.
func encodeAckValue(c ackCount, created uint64) []byte {
	return binary.BigEndian.AppendUint64(c.encode(make([]byte, 0, 24)), created)
}

// decodeAckValue reads ackKey's value: 24 bytes, or 16 (the count alone,
// as stores before the log scan wrote it, and as reconcileAck writes it),
// whose created is then unknown (known false).
func decodeAckValue(v []byte) (c ackCount, created uint64, ok bool) {
	if len(v) != 16 && len(v) != 24 {
		return ackCount{}, 0, false
	}
	c = ackCount{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])}
	if len(v) == 24 {
		created = binary.BigEndian.Uint64(v[16:])
	}
	return c, created, true
}

// ackMark is the open mark file.
type ackMark struct {
	f       *os.File
	buf     []byte
	dirty   chan struct{} // a write the syncer has not synced yet
	synced  chan struct{} // closed when the syncer exits
	syncErr atomic.Pointer[error]
}

// openAckMark opens (creating if needed) the mark in dir and reads it. ok
// is false when the file is new or empty; damaged says why a mark that is
// there cannot be read.
func openAckMark(dir string) (m *ackMark, c ackCount, ok bool, damaged string, err error) {
	path := filepath.Join(dir, AckMarkFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, c, false, "", err
	}
	m = &ackMark{f: f, buf: make([]byte, 0, ackSize), dirty: make(chan struct{}, 1), synced: make(chan struct{})}
	go m.syncer()
	b := make([]byte, ackSize+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		m.close()
		return nil, c, false, "", err
	}
	switch {
	case n == 0:
		// New: make its directory entry durable before a commit relies on it.
		if err := SyncDir(dir); err != nil {
			m.close()
			return nil, c, false, "", err
		}
		return m, c, false, "", nil
	case n != ackSize || binary.BigEndian.Uint32(b) != ackMagic ||
		crc32.ChecksumIEEE(b[:ackSize-4]) != binary.BigEndian.Uint32(b[ackSize-4:]):
		return m, c, false, fmt.Sprintf("the acknowledgement mark %s is damaged (%d bytes): whether the write-ahead log lost acknowledged writes cannot be told", AckMarkFile, n), nil
	}
	c, _ = decodeAckCount(b[4 : 4+16])
	return m, c, true, "", nil
}

// write records c in the mark, in the file's page cache, where a crash
// of the process cannot lose it, and asks the syncer to make it durable.
func (m *ackMark) write(c ackCount) error {
	if _, err := m.f.WriteAt(encodeAckMark(m.buf[:0], c), 0); err != nil {
		return err
	}
	if p := m.syncErr.Load(); p != nil {
		return *p
	}
	select {
	case m.dirty <- struct{}{}:
	default: // a sync is already due; it covers this write
	}
	return nil
}

// encodeAckMark appends the mark file's content for c to b: a magic
// number, the count and a checksum of both.
func encodeAckMark(b []byte, c ackCount) []byte {
	b = binary.BigEndian.AppendUint32(b, ackMagic)
	b = c.encode(b)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// writeAckMarkFile makes a new mark in dir holding c, durable: a copy of the
// store (backup.go) carries the count its database holds.
func writeAckMarkFile(dir string, c ackCount) error {
	f, err := os.OpenFile(filepath.Join(dir, AckMarkFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(encodeAckMark(make([]byte, 0, ackSize), c))
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	return SyncDir(dir)
}

// syncer makes the mark durable after each write, off the answer path,
// until close.
func (m *ackMark) syncer() {
	defer close(m.synced)
	for range m.dirty {
		start := time.Now()
		if err := fdatasync(m.f); err != nil {
			m.syncErr.Store(&err)
		}
		// At most one sync per markSyncInterval, so the mark's flushes do
		// not take the disk from the log's.
		if d := markSyncInterval - time.Since(start); d > 0 {
			time.Sleep(d)
		}
	}
}

// markSyncInterval is the least time between two syncs of the mark.
const markSyncInterval = 10 * time.Millisecond

// close syncs the mark a last time and closes it.
func (m *ackMark) close() error {
	close(m.dirty)
	<-m.synced
	err := fdatasync(m.f)
	if p := m.syncErr.Load(); p != nil && err == nil {
		err = *p
	}
	return errors.Join(err, m.f.Close())
}

// SyncDir makes the entries of dir durable: files created, renamed or
// removed in it.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// reconcileAck compares the mark with the count the database holds after
// replay. It returns the count to go on from and, when the log lost
// acknowledged commits, what to report. The database is brought up to the
// mark, so the loss is reported once.
func reconcileAck(db *pebble.DB, mark ackCount, marked bool) (ackCount, string, error) {
	v, ok, err := get(db, ackKey)
	if err != nil {
		return ackCount{}, "", fmt.Errorf("pebble: read the acknowledged count: %w", err)
	}
	var have ackCount
	if ok {
		if have, ok = decodeAckCount(v); !ok {
			return ackCount{}, "", fmt.Errorf("pebble: the acknowledged count is %d bytes, want 16 or 24", len(v))
		}
	}
	if !marked || mark.commits <= have.commits {
		return have, "", nil
	}
	lost := fmt.Sprintf("the write-ahead log lost %s, which created %s: the last commit acknowledged before the stop was number %d, the log holds up to number %d; those jobs, and what else those commits wrote, are missing",
		plural(mark.commits-have.commits, "acknowledged commit"), plural(mark.jobs-have.jobs, "job"), mark.commits, have.commits)
	b := db.NewBatch()
	defer b.Close()
	if err := errors.Join(b.Set(ackKey, mark.encode(nil), nil), b.Set(ackJumpKey, have.encode(nil), nil), b.Commit(pebble.Sync)); err != nil {
		return ackCount{}, "", fmt.Errorf("pebble: record the acknowledged count: %w", err)
	}
	// Into the tables at once: were the log holding the jump lost later,
	// the commits before it would be counted lost a second time.
	if err := db.Flush(); err != nil {
		return ackCount{}, "", fmt.Errorf("pebble: record the acknowledged count: %w", err)
	}
	return mark, lost, nil
}

func plural(n uint64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
