package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	pebblerecord "github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sepp-dev/sepp/internal/store"
)

// Recovery implements store.Recoverer: what Open replayed from Pebble's
// write-ahead log and what it found damaged.
func (s *Store) Recovery() store.Recovery {
	r := s.recovery
	r.Damaged = append([]string(nil), r.Damaged...)
	return r
}

// replayLogger is the Logger Pebble opens with: it keeps quietLogger's
// behaviour and takes the figures of Pebble's line at the end of each WAL's
// replay ("WAL ... stopped reading at offset: ...; replayed N keys in M
// batches"), which is the only place Pebble v2 reports them.
type replayLogger struct {
	quietLogger
	mu      sync.Mutex
	files   int
	keys    int64
	batches int64
}

const replayFormat = "replayed %d keys in %d batches"

func (l *replayLogger) Infof(format string, args ...any) {
	if !strings.HasSuffix(format, replayFormat) || len(args) < 2 {
		return
	}
	keys, ok1 := args[len(args)-2].(int64)
	batches, ok2 := args[len(args)-1].(int64)
	if !ok1 || !ok2 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.files++
	l.keys += keys
	l.batches += batches
}

func (l *replayLogger) figures() (files int, keys, batches int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.files, l.keys, l.batches
}

// walCommit is one group commit the log scan found: the count its batch
// carries under ackKey.
type walCommit struct {
	log     string   // the log file it is in
	count   ackCount // the running count, this commit included
	created uint64   // the jobs this commit created
	known   bool     // created was recorded (a batch of an older store has only the count)
	jump    bool     // reconcileAck's write, which moves the count forward on purpose
}

// walScan is what scanWAL read from the write-ahead logs before Pebble
// opens them.
type walScan struct {
	// torn says what Pebble will drop silently at the end of the newest
	// log, or is "".
	torn string
	// commits are the group commits the logs hold, oldest first, as far as
	// each log can be read.
	commits []walCommit
	// logs are the log files' names, oldest first.
	logs []string
	// uncleanOlder is the first log other than the newest that does not
	// end cleanly (cut inside a record, damaged): Pebble refuses to replay
	// it (pebble.ErrCorruption), and the commits after the damage are not
	// a hole to set aside but the reason the directory is not served.
	uncleanOlder string
}

// scanWAL reads every write-ahead log in dir, oldest first, before Pebble
// opens them, the way Pebble will replay them, for two things Pebble does
// not say:
//
//   - Pebble tolerates an incomplete record at the end of the newest log (a
//     write torn by a crash) and drops it without saying so; the scan says
//     so. A record that can never be acknowledged before it is whole on
//     disk is the only thing a torn tail can hold, unless the disk lost a
//     synced write. A damaged record with more log after it in the same
//     block, which Pebble also drops silently, is reported as damage
//     (tornAt tells the two apart). On a recycled log file the previous
//     log's bytes past a torn record make a torn tail read as damage:
//     reported either way, in stronger words.
//   - Pebble replays the logs it finds and does not notice one that is
//     missing, or an older one cut exactly where a record begins: the
//     commits they held are gone without an error. The scan collects the
//     running count of every group commit (ackKey), so that a hole can be
//     found (findHole).
//
// Corruption Pebble can prove (an older log that does not end cleanly,
// invalid or zeroed chunks followed by valid ones) is left to Pebble, which
// refuses to open with pebble.ErrCorruption: the scan stops reading that
// log there.
func scanWAL(dir string) (walScan, error) {
	var scan walScan
	wals, err := listWALs(dir)
	if err != nil {
		return scan, err
	}
	for i, w := range wals {
		scan.logs = append(scan.logs, w.name)
		torn, clean, err := scan.read(filepath.Join(dir, w.name), w.name, w.num)
		if err != nil {
			return scan, err
		}
		if i == len(wals)-1 {
			scan.torn = torn
		} else if !clean && scan.uncleanOlder == "" {
			scan.uncleanOlder = w.name
		}
	}
	return scan, nil
}

// walFile is a write-ahead log in a data directory.
type walFile struct {
	name string
	num  uint64
}

// listWALs lists the write-ahead logs in dir, oldest first.
func listWALs(dir string) ([]walFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var wals []walFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".log") {
			continue
		}
		digits := strings.TrimSuffix(name, ".log")
		if i := strings.IndexByte(digits, '-'); i >= 0 {
			digits = digits[:i] // a failover segment: NNNNNN-SSS.log
		}
		n, err := strconv.ParseUint(digits, 10, 64)
		if err != nil {
			continue
		}
		wals = append(wals, walFile{name, n})
	}
	sort.Slice(wals, func(i, j int) bool {
		return wals[i].num < wals[j].num || wals[i].num == wals[j].num && wals[i].name < wals[j].name
	})
	return wals, nil
}

// read reads one log, appending its group commits to scan.commits, and
// says what Pebble will drop silently at its end if it is the newest, and
// whether the log ends cleanly.
func (scan *walScan) read(path, name string, num uint64) (tail string, clean bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	rr, err := newRecordReader(f, num)
	if err != nil {
		return "", false, err
	}
	records := 0
	good := int64(0) // the offset after the last whole record
	var buf bytes.Buffer
	for {
		buf.Reset()
		r, err := rr.Next()
		if err == nil {
			_, err = io.Copy(&buf, r)
		}
		switch {
		case err == nil:
			records++
			good = rr.Offset()
			if c, ok := commitOf(buf.Bytes()); ok {
				c.log = name
				scan.commits = append(scan.commits, c)
			}
			continue
		case errors.Is(err, io.EOF):
			return "", true, nil
		case errors.Is(err, pebblerecord.ErrUnexpectedEOF):
			// Pebble stops here and drops the rest. In a reused log file
			// what follows may be the records of the log the file held
			// before: the log ends here.
			if previousLogAfter(f, good, num) {
				return "", true, nil
			}
			// Bytes that are not zero past the record being read mean
			// more than a torn last write: a damaged record with more
			// after it.
			rest, torn, err := tornAt(f, good)
			if err != nil {
				return "", false, err
			}
			if torn {
				return fmt.Sprintf("the write-ahead log %s ended in an incomplete record after %d whole ones: a write torn by a crash, dropped", name, records), false, nil
			}
			return fmt.Sprintf("the write-ahead log %s could not be read past offset %d, after %d whole records: a damaged record, and the %d bytes of log after it, were dropped", name, good, records, rest), false, nil
		default:
			// Invalid or zeroed chunks followed by valid ones: Pebble
			// refuses the log with ErrCorruption and Open says so.
			return "", false, nil
		}
	}
}

// commitOf reads a log record as a Pebble batch and returns the group
// commit it is, if it carries ackKey.
func commitOf(repr []byte) (walCommit, bool) {
	var c walCommit
	found := false
	r := batchrepr.Read(repr)
	for {
		kind, k, v, ok, err := r.Next()
		if !ok || err != nil {
			return c, found
		}
		if kind != pebble.InternalKeyKindSet {
			continue
		}
		switch {
		case bytes.Equal(k, ackKey):
			count, created, ok := decodeAckValue(v)
			if !ok {
				continue
			}
			c.count, c.created, c.known, found = count, created, len(v) == 24, true
		case bytes.Equal(k, ackJumpKey):
			c.jump = true
		}
	}
}

// findHole compares the group commits the logs hold with durable, the
// count in the database's tables (what was flushed before the oldest log
// Pebble replays), and finds the first place where commits are missing
// between them: a log deleted, or an older log cut where a record begins.
// A commit at or below the one before it is one the tables already hold
// (a log whose deletion a crash interrupted); a jump (reconcileAck) starts
// the count afresh. It returns the log the first commit after the hole is
// in, or "" when the commits follow each other without a gap, and the
// hole's words.
func findHole(durable ackCount, commits []walCommit) (after string, words string) {
	prev := durable
	prevLog := "the database's tables"
	for _, c := range commits {
		switch {
		case c.jump:
		case c.count.commits <= prev.commits:
			continue
		case c.count.commits > prev.commits+1:
			return c.log, fmt.Sprintf("the write-ahead logs have a hole: %s, numbers %d to %d, are in no log (between %s and %s: a log file is missing, or one was cut short)",
				plural(c.count.commits-prev.commits-1, "acknowledged commit"), prev.commits+1, c.count.commits-1, prevLog, c.log)
		}
		prev, prevLog = c.count, c.log
	}
	return "", ""
}

// LostWALDir is the folder of the data directory where Open moves the
// write-ahead logs that come after a hole (findHole).
const LostWALDir = "lost-wal"

// setAsideAfterHole moves the logs from after (the first log after a hole)
// on into LostWALDir, before Pebble opens the directory. Their writes may
// depend on the ones missing before them (a dedup record that names a job
// the hole took, a completion of it): replayed, they would leave a state
// no sequence of acknowledged writes produced. Without them the store holds
// every write up to the hole and none after, as after a cut tail, and the
// acknowledgement mark counts what that lost. It returns what it did, for
// the recovery report.
func setAsideAfterHole(dir string, logs []string, after string) (string, error) {
	i := slices.Index(logs, after)
	if i < 0 {
		return "", fmt.Errorf("pebble: the log %s after the hole is not among the logs read", after)
	}
	moved := logs[i:]
	lost := filepath.Join(dir, LostWALDir)
	if err := os.MkdirAll(lost, 0o755); err != nil {
		return "", err
	}
	for _, name := range moved {
		to := filepath.Join(lost, name)
		for n := 1; ; n++ { // a log set aside at an earlier start keeps its name
			if _, err := os.Stat(to); errors.Is(err, os.ErrNotExist) {
				break
			}
			to = filepath.Join(lost, fmt.Sprintf("%s.%d", name, n))
		}
		if err := os.Rename(filepath.Join(dir, name), to); err != nil {
			return "", err
		}
	}
	if err := errors.Join(SyncDir(lost), SyncDir(dir)); err != nil {
		return "", err
	}
	return fmt.Sprintf("the %s from %s on (%s), whose writes may depend on the missing ones, were moved to %s and not replayed: the store holds every write up to the hole and none after it",
		plural(uint64(len(moved)), "log"), after, strings.Join(moved, ", "), lost), nil
}

// previousLogAfter reports whether the log file f, of log number num, holds
// another log's records after off, the end of its last whole record. Pebble
// reuses the files of logs it no longer needs, and a log that was not
// closed (the live log at a crash, or in a backup's copy) has no end-of-log
// trailer: its file goes on with the records of the log it held before,
// which Pebble reads as the end of this one. The first chunk of the next
// 32 KiB block tells (a block always begins with a chunk): a whole chunk,
// its checksum right, that names another log.
func previousLogAfter(f *os.File, off int64, num uint64) bool {
	const blockSize = 32 << 10
	next := (off/blockSize + 1) * blockSize
	var h [11]byte
	if _, err := f.ReadAt(h[:], next); err != nil {
		return false
	}
	if h[6] < 5 || h[6] > 12 { // the chunk types that carry a log number
		return false
	}
	header := int64(11)
	if h[6] >= 9 { // the WAL-sync types add an 8-byte offset
		header = 19
	}
	length := int64(binary.LittleEndian.Uint16(h[4:6]))
	if next%blockSize+header+length > blockSize {
		return false
	}
	chunk := make([]byte, header+length)
	if _, err := f.ReadAt(chunk, next); err != nil {
		return false
	}
	c := crc32.Checksum(chunk[6:], crc32.MakeTable(crc32.Castagnoli))
	masked := (c>>15 | c<<17) + 0xa282ead8 // Pebble's masked CRC-32C
	return masked == binary.LittleEndian.Uint32(h[0:4]) && binary.LittleEndian.Uint32(h[7:11]) != uint32(num)
}

// tornAt reads the log f from off, the end of its last whole record, to
// its last non-zero byte (rest bytes), and says whether that looks like one
// write cut short: a chunk header that declares more bytes than follow it.
// A whole chunk that failed its checksum, or more data than the chunk it
// starts with, is damage. A record of several chunks (one write larger than
// a 32 KiB block) cut short is taken as torn as well.
func tornAt(f *os.File, off int64) (rest int64, torn bool, err error) {
	b, err := io.ReadAll(io.NewSectionReader(f, off, 1<<62))
	if err != nil {
		return 0, false, err
	}
	b = bytes.TrimRight(b, "\x00")
	rest = int64(len(b))
	const legacyHeader, recyclableHeader = 7, 11
	if len(b) < legacyHeader {
		return rest, true, nil
	}
	if b[6] < 1 || b[6] > 10 {
		return rest, false, nil // not a chunk type: a damaged header
	}
	length := int64(b[4]) | int64(b[5])<<8
	header := int64(legacyHeader)
	switch b[6] {
	case 5, 6, 7, 8, 9, 10: // the recyclable and WAL-sync chunk types
		header = recyclableHeader
	}
	switch b[6] {
	case 2, 6: // the first chunk of a record of several
		return rest, true, nil
	}
	return rest, rest < header+length, nil
}

// newRecordReader calls pebblerecord.NewReader, whose log number parameter has a
// type of Pebble's internal package, by reflection.
func newRecordReader(r io.Reader, logNum uint64) (*pebblerecord.Reader, error) {
	fn := reflect.ValueOf(pebblerecord.NewReader)
	t := fn.Type()
	if t.NumIn() != 2 || !reflect.TypeOf(logNum).ConvertibleTo(t.In(1)) {
		return nil, errors.New("pebble: pebblerecord.NewReader has an unexpected signature")
	}
	out := fn.Call([]reflect.Value{reflect.ValueOf(r), reflect.ValueOf(logNum).Convert(t.In(1))})
	rr, ok := out[0].Interface().(*pebblerecord.Reader)
	if !ok {
		return nil, errors.New("pebble: pebblerecord.NewReader returned an unexpected type")
	}
	return rr, nil
}

// corruptionError makes Pebble's refusal of damaged data say what it means.
// Pebble marks its corruption errors with github.com/cockroachdb/errors,
// whose marks the standard library's errors.Is does not see (an older log
// cut short came through as a bare "pebble/record: unexpected EOF"):
// pebble.IsCorruptionError reads them.
func corruptionError(path string, err error) error {
	if !pebble.IsCorruptionError(err) {
		return err
	}
	return corrupted{fmt.Errorf("the data in %s is damaged and was not served (pebble.ErrCorruption); restore your latest backup with sepp restore --from BACKUP --data %s --force, which moves this directory aside (kept for inspection): %w", path, path, err)}
}

// corrupted is a refusal of damaged data that the standard library's
// errors.Is also takes for pebble.ErrCorruption.
type corrupted struct{ error }

func (c corrupted) Unwrap() error        { return c.error }
func (c corrupted) Is(target error) bool { return target == pebble.ErrCorruption }

// durableAck reads the running count of group commits from the database's
// tables alone: what the logs Pebble is about to replay must continue
// (findHole). A read-only open whose log directory is an empty one replays
// no log. A new directory has no count (zero).
func durableAck(dir string, fs vfs.FS, lock *pebble.Lock) (ackCount, error) {
	if fs == nil {
		fs = vfs.Default
	}
	desc, err := pebble.Peek(dir, fs)
	if err != nil || !desc.Exists {
		return ackCount{}, err
	}
	empty := fs.PathJoin(dir, "sepp-recovery-no-wal")
	if err := fs.MkdirAll(empty, 0o755); err != nil {
		return ackCount{}, err
	}
	defer fs.RemoveAll(empty)
	ro := &pebble.Options{ReadOnly: true, WALDir: empty, FS: fs, Lock: lock, Logger: quietLogger{}}
	ro.Unsafe.AllowMissingWALDirs = true // the point: the tables alone, no log
	db, err := pebble.Open(dir, ro)
	if err != nil {
		return ackCount{}, corruptionError(dir, err)
	}
	defer db.Close()
	v, ok, err := get(db, ackKey)
	if err != nil || !ok {
		return ackCount{}, corruptionError(dir, err)
	}
	c, ok := decodeAckCount(v)
	if !ok {
		return ackCount{}, fmt.Errorf("pebble: the acknowledged count is %d bytes, want 16 or 24", len(v))
	}
	return c, nil
}
