package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTestdata(t *testing.T) {
	for _, tc := range []struct {
		file     string
		kinds    map[Kind]int
		ops      map[Kind][]OpRef
		warnings int
	}{
		{file: "keyed_retries.jsonl"},
		{file: "batches_effects.jsonl", warnings: 1},
		{file: "phantom_and_twice.jsonl",
			kinds: map[Kind]int{KindPhantomJob: 1, KindEffectRanTwice: 1},
			ops: map[Kind][]OpRef{
				KindPhantomJob:     nil,
				KindEffectRanTwice: {ref(2, "c1"), ref(3, "d1"), ref(4, "c2"), ref(5, "d2")},
			}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			h, err := ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if h.State == nil {
				t.Fatal("no state section read")
			}
			rep := Check(h)
			got := rep.ByKind()
			if len(got) != len(tc.kinds) {
				t.Fatalf("violations: got %v, want %v:\n%s", got, tc.kinds, rep)
			}
			for k, n := range tc.kinds {
				if got[k] != n {
					t.Errorf("%s: got %d, want %d", k, got[k], n)
				}
			}
			for _, v := range rep.Violations {
				if want, ok := tc.ops[v.Kind]; ok && !reflect.DeepEqual(v.Ops, want) {
					t.Errorf("%s names %v, want %v", v.Kind, v.Ops, want)
				}
			}
			if len(rep.Warnings) != tc.warnings {
				t.Errorf("warnings: got %d, want %d:\n%s", len(rep.Warnings), tc.warnings, rep)
			}
		})
	}
}

// Blank lines count as lines: the records after one keep their file line.
func TestReaderLineNumbers(t *testing.T) {
	h, err := ReadFile(filepath.Join("testdata", "keyed_retries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Ops[3].ID != "p2-2" || h.Ops[3].Line != 5 {
		t.Errorf("4th record: id %q line %d, want p2-2 on line 5", h.Ops[3].ID, h.Ops[3].Line)
	}
	// Unix nanoseconds and RFC 3339 read to the same instant.
	if got, want := h.Ops[1].Start.Time, time.Date(2026, 12, 2, 1, 0, 5, 100000000, time.UTC); !got.Equal(want) {
		t.Errorf("unix nanos start: %v, want %v", got, want)
	}
	if got := h.Ops[0].Start.Nanosecond(); got != 1 {
		t.Errorf("RFC 3339 nanoseconds: %d", got)
	}
}

func TestReaderErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"not json", "{\"op\":\"enqueue\"}\nnope\n", "line 2"},
		{"unknown field", `{"op":"enqueue","bogus":1}`, "bogus"},
		{"no op", `{"process":1}`, "no op"},
		{"bad time", `{"op":"enqueue","start":"yesterday"}`, "yesterday"},
		{"two states", "{\"state\":{}}\n{\"state\":{}}\n", "second state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// N processes write through one Writer at once; every line is whole, every
// record reads back equal, in each process's own order.
func TestWriterReaderRoundTripConcurrent(t *testing.T) {
	const procs, each = 8, 200
	var buf bytes.Buffer
	w := NewWriter(&buf)
	want := map[string]Record{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := 1; p <= procs; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r := Record{
					Process: p, ID: fmt.Sprintf("p%d-%d", p, i), Op: OpEnqueueBatch, Queue: "q",
					Start: At(t0.Add(time.Duration(p*each+i) * time.Nanosecond)), End: at(p*each + i + 1),
					Outcome: OK, Atomic: i%2 == 0,
					Items: []Item{{Key: fmt.Sprintf("k%d", i), Payload: Fingerprint([]byte{byte(i)}), Outcome: OK, JobID: "J", Deduplicated: i%3 == 0}},
				}
				if i%5 == 0 {
					r = Record{Process: p, ID: r.ID, Op: OpClaimEffect, Scope: "s", Key: "k", Start: r.Start, End: r.End,
						Outcome: Unknown, Reason: "UNAVAILABLE", EffectOutcome: EffectAcquired, EffectToken: "E", EffectResult: "x\n\"y\""}
				}
				mu.Lock()
				want[r.ID] = r
				mu.Unlock()
				if err := w.Write(r); err != nil {
					t.Error(err)
					return
				}
			}
		}(p)
	}
	wg.Wait()
	st := State{ReadAt: at(1), Jobs: []Job{job("J", "q", "k", "completed", 1)},
		Dedup:   []DedupRecord{{Queue: "q", Key: "k", JobID: "J", ExpiresAt: at(2)}},
		Effects: []Effect{effect("s", "k", "x")}, Deleted: []string{"J0"},
		Queues: []QueuePolicy{queue("q", 1000, "reject")}}
	if err := w.WriteState(st); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != procs*each+1 {
		t.Fatalf("%d lines, want %d", n, procs*each+1)
	}
	h, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) != procs*each {
		t.Fatalf("%d records, want %d", len(h.Ops), procs*each)
	}
	next := map[int]int{}
	for i, r := range h.Ops {
		if r.Line != i+1 {
			t.Fatalf("record %d has line %d", i, r.Line)
		}
		if r.ID != fmt.Sprintf("p%d-%d", r.Process, next[r.Process]) {
			t.Fatalf("process %d: got %s, want its record %d", r.Process, r.ID, next[r.Process])
		}
		next[r.Process]++
		w := want[r.ID]
		r.Line = 0
		if !r.Start.Equal(w.Start.Time) || !r.End.Equal(w.End.Time) {
			t.Fatalf("%s: times %v %v, want %v %v", r.ID, r.Start, r.End, w.Start, w.End)
		}
		r.Start, r.End, w.Start, w.End = Time{}, Time{}, Time{}, Time{}
		if !reflect.DeepEqual(r, w) {
			t.Fatalf("%s:\n got %+v\nwant %+v", r.ID, r, w)
		}
	}
	gotState, _ := json.Marshal(h.State)
	wantState, _ := json.Marshal(st)
	if !bytes.Equal(gotState, wantState) {
		t.Errorf("state:\n got %s\nwant %s", gotState, wantState)
	}
}

func TestTimeJSON(t *testing.T) {
	tm := At(time.Date(2026, 12, 2, 1, 0, 0, 123456789, time.FixedZone("x", 3600)))
	b, err := json.Marshal(tm)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `"2026-12-02T00:00:00.123456789Z"` {
		t.Errorf("marshal: %s", b)
	}
	var back Time
	if err := json.Unmarshal([]byte("1796169600123456789"), &back); err != nil || !back.Equal(tm.Time) {
		t.Errorf("unix nanos: %v %v", back, err)
	}
	if b, _ := json.Marshal(Time{}); string(b) != "null" {
		t.Errorf("zero: %s", b)
	}
}
