package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	pebblerecord "github.com/cockroachdb/pebble/v2/record"

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

// checkWALTail reads the newest write-ahead log in dir, before Pebble
// opens it, the way Pebble will replay it. Pebble tolerates an incomplete
// record at the end of the newest log (a write torn by a crash) and drops
// it without saying so; checkWALTail says so. A record that can never be
// acknowledged before it is whole on disk is the only thing a torn tail
// can hold, unless the disk lost a synced write. It returns "" when the log
// ends cleanly or there is none. A damaged record with more log after it
// in the same block, which Pebble also drops silently, is reported as
// damage (tornAt tells the two apart); corruption Pebble can prove is left
// to Pebble, which refuses to open with pebble.ErrCorruption. On a recycled
// log file the previous log's bytes past a torn record make a torn tail
// read as damage: reported either way, in stronger words.
func checkWALTail(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	type wal struct {
		name string
		num  uint64
	}
	var wals []wal
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
		wals = append(wals, wal{name, n})
	}
	if len(wals) == 0 {
		return "", nil
	}
	sort.Slice(wals, func(i, j int) bool {
		return wals[i].num < wals[j].num || wals[i].num == wals[j].num && wals[i].name < wals[j].name
	})
	newest := wals[len(wals)-1]
	f, err := os.Open(filepath.Join(dir, newest.name))
	if err != nil {
		return "", err
	}
	defer f.Close()
	rr, err := newRecordReader(f, newest.num)
	if err != nil {
		return "", err
	}
	records := 0
	good := int64(0) // the offset after the last whole record
	for {
		r, err := rr.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		switch {
		case err == nil:
			records++
			good = rr.Offset()
			continue
		case errors.Is(err, io.EOF):
			return "", nil
		case errors.Is(err, pebblerecord.ErrUnexpectedEOF):
			// Pebble stops here and drops the rest. Bytes that are not
			// zero past the record being read mean more than a torn last
			// write: a damaged record with more after it.
			rest, torn, err := tornAt(f, good)
			if err != nil {
				return "", err
			}
			if torn {
				return fmt.Sprintf("the write-ahead log %s ended in an incomplete record after %d whole ones: a write torn by a crash, dropped", newest.name, records), nil
			}
			return fmt.Sprintf("the write-ahead log %s could not be read past offset %d, after %d whole records: a damaged record, and the %d bytes of log after it, were dropped", newest.name, good, records, rest), nil
		default:
			// Invalid or zeroed chunks followed by valid ones: Pebble
			// refuses the log with ErrCorruption and Open says so.
			return "", nil
		}
	}
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
func corruptionError(path string, err error) error {
	if !errors.Is(err, pebble.ErrCorruption) {
		return err
	}
	return fmt.Errorf("the data in %s is damaged and was not served (pebble.ErrCorruption); restore the directory from a backup or move it aside: %w", path, err)
}
