package storerule

import (
	"errors"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func key(k string) *string { return &k }

func TestPrepare(t *testing.T) {
	now := t0.UnixMicro()
	tests := []struct {
		name      string
		job       store.EnqueueJob
		wantRunAt int64
		wantState store.JobState
		wantErr   bool
	}{
		{"no run-at runs now", store.EnqueueJob{}, now, store.JobStateAvailable, false},
		{"a past run-at is clamped to now", store.EnqueueJob{RunAt: t0.Add(-time.Hour)}, now, store.JobStateAvailable, false},
		{"run-at now is available", store.EnqueueJob{RunAt: t0}, now, store.JobStateAvailable, false},
		{"a future run-at is scheduled", store.EnqueueJob{RunAt: t0.Add(time.Minute)}, t0.Add(time.Minute).UnixMicro(), store.JobStateScheduled, false},
		{"a keyed job needs a window", store.EnqueueJob{IdempotencyKey: key("k")}, 0, 0, true},
		{"a keyed job with a window", store.EnqueueJob{IdempotencyKey: key("k"), DedupWindow: time.Hour}, now, store.JobStateAvailable, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := Prepare(&tt.job, now)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if j.RunAt != tt.wantRunAt || j.State != tt.wantState {
				t.Fatalf("run-at %d state %v, want %d %v", j.RunAt, j.State, tt.wantRunAt, tt.wantState)
			}
			if j.Payload == nil {
				t.Fatal("nil payload: must be stored as empty bytes")
			}
		})
	}
}

func TestPrepareKeyFingerprintHeaders(t *testing.T) {
	j, err := Prepare(&store.EnqueueJob{Queue: "q", JobType: "t", Payload: []byte("p"), IdempotencyKey: key("a\x00b"),
		DedupWindow: time.Second, Headers: map[string]string{"h": "v"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !j.Keyed || j.Key != "a\x00b" || j.Window != 1e6 || j.Fingerprint != store.NewFingerprint("t", []byte("p")) {
		t.Fatalf("keyed job: %+v", j)
	}
	h, err := DecodeHeaders(j.Headers)
	if err != nil || h["h"] != "v" || len(h) != 1 {
		t.Fatalf("headers round trip: %v %v", h, err)
	}
	other, _ := Prepare(&store.EnqueueJob{}, 0)
	if other.ID == j.ID || other.Headers != nil || other.Keyed {
		t.Fatalf("unkeyed job without headers: %+v", other)
	}
	if _, err := PrepareBatch([]store.EnqueueJob{{}, {IdempotencyKey: key("k")}}, 0); !isJobError(err, 1) {
		t.Fatalf("PrepareBatch: %v, want a JobError at index 1", err)
	}
}

func isJobError(err error, index int) bool {
	var je *store.JobError
	return errors.As(err, &je) && je.Index == index
}

func TestPending(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0001_init.sql":   {},
		"m/0002_leases.sql": {},
		"m/0003_more.sql":   {},
	}
	known, err := Migrations(fsys, "m")
	if err != nil || len(known) != 3 || known[2].Version != 3 {
		t.Fatalf("Migrations: %v %v", known, err)
	}
	tests := []struct {
		applied int
		want    int // pending count; -1: refused
	}{{0, 3}, {1, 2}, {3, 0}, {4, -1}}
	for _, tt := range tests {
		got, err := Pending(known, tt.applied)
		switch {
		case tt.want < 0 && !errors.Is(err, store.ErrSchemaTooNew):
			t.Errorf("applied %d: %v, want ErrSchemaTooNew", tt.applied, err)
		case tt.want >= 0 && (err != nil || len(got) != tt.want):
			t.Errorf("applied %d: %d pending, %v; want %d", tt.applied, len(got), err, tt.want)
		}
	}
	for _, bad := range []fstest.MapFS{{"m/init.sql": {}}, {"m/0001_a.sql": {}, "m/0001_b.sql": {}}} {
		if _, err := Migrations(bad, "m"); err == nil {
			t.Errorf("Migrations accepted %v", bad)
		}
	}
}

func TestLifecycleRules(t *testing.T) {
	if s, e := AfterLeaseExpiry(1, 3); s != store.JobStateAvailable || e != "" {
		t.Errorf("lease expiry with attempts left: %v %q", s, e)
	}
	if s, e := AfterLeaseExpiry(3, 3); s != store.JobStateDead || e != LeaseExpiredError {
		t.Errorf("lease expiry on the last attempt: %v %q", s, e)
	}
	if !LeaseEnded(10, 10) || LeaseEnded(11, 10) {
		t.Error("a lease holds until, not through, its expiry")
	}
	retry := func(at time.Time) func(string, int32) time.Time { return func(string, int32) time.Time { return at } }
	fails := []struct {
		name      string
		p         store.FailParams
		attempts  int32
		wantState store.JobState
		wantRunAt int64
	}{
		{"attempts left", store.FailParams{RetryAt: retry(t0.Add(time.Second)), Now: t0}, 1, store.JobStateScheduled, t0.Add(time.Second).UnixMicro()},
		{"retry in the past runs now", store.FailParams{RetryAt: retry(t0.Add(-time.Second)), Now: t0}, 1, store.JobStateScheduled, t0.UnixMicro()},
		{"permanent", store.FailParams{Permanent: true, RetryAt: retry(t0), Now: t0}, 1, store.JobStateDead, t0.UnixMicro()},
		{"out of attempts", store.FailParams{RetryAt: retry(t0), Now: t0}, 3, store.JobStateDead, t0.UnixMicro()},
	}
	for _, f := range fails {
		if s, r := AfterFail(&f.p, "q", f.attempts, 3); s != f.wantState || r != f.wantRunAt {
			t.Errorf("%s: %v %d, want %v %d", f.name, s, r, f.wantState, f.wantRunAt)
		}
	}
	if VisibleState(store.JobStateScheduled, 5, 5, false) != store.JobStateAvailable || VisibleState(store.JobStateScheduled, 6, 5, false) != store.JobStateScheduled {
		t.Error("a scheduled job is visible as available once its run-at has come")
	}
	if VisibleState(store.JobStateScheduled, 5, 5, true) != store.JobStateScheduled {
		t.Error("a waiting follow-up is visible as scheduled")
	}
	r := Retentions(&store.SweepParams{Now: t0, CompletedRetention: time.Hour, DeadRetention: 2 * time.Hour})
	if len(r) != 3 || r[0].Before != t0.Add(-time.Hour).UnixMicro() || r[2].State != store.JobStateDead ||
		r[2].Before != t0.Add(-2*time.Hour).UnixMicro() {
		t.Errorf("retentions %+v", r)
	}
	if DeliveryOrder(1, 9, store.JobID{9}, 0, 0, store.JobID{0}) >= 0 || DeliveryOrder(0, 1, store.JobID{9}, 0, 2, store.JobID{0}) >= 0 ||
		DeliveryOrder(0, 1, store.JobID{1}, 0, 1, store.JobID{2}) >= 0 {
		t.Error("delivery order: priority desc, then run-at, then id")
	}
}

func TestJudgeClaim(t *testing.T) {
	tok := store.LeaseToken{1}
	tests := []struct {
		name      string
		rec       *EffectRecord
		wantTaken bool
		wantState store.EffectState
	}{
		{"no record", nil, false, 0},
		{"completed and live", &EffectRecord{State: store.EffectCompleted, ExpiresAt: 11}, true, store.EffectCompleted},
		{"completed and expired", &EffectRecord{State: store.EffectCompleted, ExpiresAt: 10}, false, 0},
		{"held", &EffectRecord{State: store.EffectInProgress, Token: tok, LeaseExpiresAt: 11}, true, store.EffectInProgress},
		{"a lease that ended", &EffectRecord{State: store.EffectInProgress, Token: tok, LeaseExpiresAt: 10}, false, 0},
	}
	for _, tt := range tests {
		c, taken := JudgeClaim(tt.rec, 10)
		if taken != tt.wantTaken || c.State != tt.wantState {
			t.Errorf("%s: %v %v", tt.name, c.State, taken)
		}
	}
	held := &EffectRecord{State: store.EffectInProgress, Token: tok, LeaseExpiresAt: 11}
	if !held.Held(tok, 10) || held.Held(store.LeaseToken{2}, 10) || held.Held(tok, 11) {
		t.Error("Held")
	}
}

func TestRepeatedFail(t *testing.T) {
	for _, tt := range []struct {
		state store.JobState
		ok    bool
		want  store.JobState
	}{
		{store.JobStateScheduled, true, store.JobStateScheduled},
		{store.JobStateAvailable, true, store.JobStateScheduled},
		{store.JobStateDead, true, store.JobStateDead},
		{store.JobStateCompleted, false, 0},
		{store.JobStateCancelled, false, 0},
		{store.JobStateReserved, false, 0},
	} {
		res, ok := RepeatedFail(tt.state, 1_000_000)
		if ok != tt.ok || res.State != tt.want || ok != res.AlreadyFailed {
			t.Errorf("RepeatedFail(%v): %+v %v", tt.state, res, ok)
		}
		if tt.want == store.JobStateScheduled && !res.NextRunAt.Equal(FromMicros(1_000_000)) {
			t.Errorf("RepeatedFail(%v): next run %v", tt.state, res.NextRunAt)
		}
	}
}

func TestSweepHorizon(t *testing.T) {
	sweep := t0.UnixMicro()
	cut := SweepCut(sweep)
	if want := t0.Add(-DedupSweepGrace).UnixMicro(); cut != want {
		t.Fatalf("SweepCut(t0) = %d, want %d (t0 - DedupSweepGrace)", cut, want)
	}
	tests := []struct {
		name  string
		now   int64
		stale bool
	}{
		{"before the horizon", cut - 1, true},
		{"at the horizon", cut, true},
		{"just after the horizon", cut + 1, false},
		{"a request as old as the grace less a microsecond", sweep - DedupSweepGrace.Microseconds() + 1, false},
		{"a request from the sweep's own time", sweep, false},
	}
	for _, tt := range tests {
		err := Stale(tt.now, cut)
		if got := err != nil; got != tt.stale {
			t.Errorf("%s: Stale = %v, want stale %v", tt.name, err, tt.stale)
		}
		if err != nil && (!errors.Is(err, store.ErrStaleEnqueue) || !errors.Is(err, store.ErrUnavailable)) {
			t.Errorf("%s: %v is not ErrStaleEnqueue and ErrUnavailable", tt.name, err)
		}
	}
	if ReadsRecords([]Job{{}}) || !ReadsRecords([]Job{{}, {Keyed: true}}) || !ReadsRecords([]Job{{Rules: []Rule{{Name: "r"}}}}) {
		t.Error("ReadsRecords: only a keyed job or a job under a rule reads dedup records")
	}
}

// TestReplacement: the run-at and state a replacing hit gives the waiting
// original job. A debounced job runs Debounce after the latest request, so a
// request whose now is older than a run-at already set (it arrived first
// but decided after a later request) never moves the job earlier.
func TestReplacement(t *testing.T) {
	t.Parallel()
	const ms = int64(1000) // microseconds
	debounce := &Job{Replace: true, Debounce: 500 * ms}
	capped := &Job{Replace: true, Debounce: 500 * ms, DebounceMaxWait: 2000 * ms}
	replace := &Job{Replace: true, RunAt: 7000 * ms}
	rec := &Record{FirstEnqueuedAt: 1000 * ms}
	for _, tc := range []struct {
		name         string
		j            *Job
		state        store.JobState
		current, now int64
		wantRunAt    int64
		wantState    store.JobState
		wantOK       bool
	}{
		{"debounce: now + Debounce", debounce, store.JobStateScheduled, 1500 * ms, 1200 * ms, 1700 * ms, store.JobStateScheduled, true},
		{"debounce: a stale now keeps the later run-at", debounce, store.JobStateScheduled, 1540 * ms, 870 * ms, 1540 * ms, store.JobStateScheduled, true},
		{"debounce: capped by the first enqueue + DebounceMaxWait", capped, store.JobStateScheduled, 2900 * ms, 2800 * ms, 3000 * ms, store.JobStateScheduled, true},
		{"debounce: never earlier than now", capped, store.JobStateAvailable, 3000 * ms, 3500 * ms, 3500 * ms, store.JobStateAvailable, true},
		{"replace takes the request's run-at", replace, store.JobStateAvailable, 1000 * ms, 2000 * ms, 7000 * ms, store.JobStateScheduled, true},
		{"a reserved job is not replaced", debounce, store.JobStateReserved, 1000 * ms, 2000 * ms, 0, 0, false},
		{"a completed job is not replaced", debounce, store.JobStateCompleted, 1000 * ms, 2000 * ms, 0, 0, false},
	} {
		runAt, st, ok := Replacement(tc.j, rec, tc.state, tc.current, tc.now)
		if runAt != tc.wantRunAt || st != tc.wantState || ok != tc.wantOK {
			t.Errorf("%s: Replacement = (%d, %v, %v), want (%d, %v, %v)", tc.name, runAt, st, ok, tc.wantRunAt, tc.wantState, tc.wantOK)
		}
	}
}
