package storerule

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// The batch rules, each as a table case: records stored before the group,
// the group's calls, and what each call answered and the group then holds.
//
// Jobs are on queue "q" and are named by their place in the group, across
// its calls: 0, 1, 2...; "s" is the job of a stored record. An answer is a
// token per job:
//
//	N      created
//	H<j>   a hit on job j; M<j> a hit with a payload mismatch; a trailing *
//	       when the hit replaced the job
//	C      refused: the key is held with another payload (reject_mismatch)
//	D<j>   refused: a duplicate of job j (reject_duplicate)
//	V<j>   refused: a rule key is held by job j
//
// or, for a call that failed whole, E<i> (atomic, at its job i) or STALE.
// A group holds, after its calls: "new" the jobs to write; "records" each
// record written or hit, sorted by key, as key:job, with +hits when it was
// hit; "expired" the stored records replaced.

// spec builds one job of a case.
type spec func(*store.EnqueueJob)

// kj is a job keyed k; its payload is "p" unless opts change it.
func kj(k string, opts ...spec) []spec { return append([]spec{keyed(k)}, opts...) }

func keyed(k string) spec { return func(j *store.EnqueueJob) { j.IdempotencyKey = &k } }

func payload(p string) spec { return func(j *store.EnqueueJob) { j.Payload = []byte(p) } }

// rule puts the job under rule "r" (a minute) with rule key k, named
// "r:k" in records.
func rule(k string) spec {
	return func(j *store.EnqueueJob) {
		j.Rules = append(j.Rules, store.RuleKey{Name: "r", Key: k, Window: time.Minute})
	}
}

func window(d time.Duration) spec { return func(j *store.EnqueueJob) { j.DedupWindow = d } }

var (
	rejectMismatch  spec = func(j *store.EnqueueJob) { j.RejectMismatch = true }
	rejectDuplicate spec = func(j *store.EnqueueJob) { j.RejectDuplicate = true }
	replaces        spec = func(j *store.EnqueueJob) { j.Replace = true }
)

// decideCall is one call of a case, made at t0 + at.
type decideCall struct {
	atomic bool
	at     time.Duration
	jobs   [][]spec
}

// storedJob is the job of the records a case stores.
var storedJob = store.JobID{0x5e}

// stored is a record of the stored job, first enqueued a second before t0,
// expiring at t0 + expires, with payload "p"; key "r:x" is rule key x.
type stored struct {
	key     string
	expires time.Duration
}

func (s stored) entry() (Key, *Entry) {
	k := Key{"q", s.key}
	var fp store.Fingerprint
	if rk, ok := strings.CutPrefix(s.key, "r:"); ok {
		k = Key{RuleQueue("q", "r"), rk}
	} else {
		fp = store.NewFingerprint("t", []byte("p"))
	}
	return k, &Entry{Stored: true, Record: Record{JobID: storedJob, FirstEnqueuedAt: t0.Add(-time.Second).UnixMicro(),
		ExpiresAt: t0.Add(s.expires).UnixMicro(), Fingerprint: fp}}
}

// decide runs calls on g, and returns their answers, the first job of the
// group and the names of the jobs by id.
func decide(t *testing.T, g *Group, calls []decideCall) (answers []string, first *Job, names map[store.JobID]string) {
	t.Helper()
	names = map[store.JobID]string{storedJob: "s"}
	for _, c := range calls {
		now := t0.Add(c.at).UnixMicro()
		jobs := make([]Job, len(c.jobs))
		for i, opts := range c.jobs {
			ej := store.EnqueueJob{Queue: "q", JobType: "t", Payload: []byte("p"), DedupWindow: time.Hour}
			for _, o := range opts {
				o(&ej)
			}
			j, err := Prepare(&ej, now)
			if err != nil {
				t.Fatal(err)
			}
			names[j.ID] = fmt.Sprint(len(names) - 1)
			jobs[i] = j
		}
		if first == nil && len(jobs) > 0 {
			first = &jobs[0]
		}
		results := make([]store.EnqueueResult, len(jobs))
		answers = append(answers, answer(g.Decide(c.atomic, now, jobs, results), results, names))
	}
	return answers, first, names
}

// storing returns a group holding records.
func storing(records ...stored) *Group {
	g := NewGroup()
	for _, s := range records {
		k, e := s.entry()
		g.Records[k] = e
	}
	return g
}

// answer renders a call's answer in the tokens above.
func answer(err error, results []store.EnqueueResult, names map[store.JobID]string) string {
	var je *store.JobError
	switch {
	case errors.Is(err, store.ErrStaleEnqueue):
		return "STALE"
	case errors.As(err, &je):
		return fmt.Sprintf("E%d", je.Index)
	case err != nil:
		return err.Error()
	}
	tokens := make([]string, len(results))
	for i, r := range results {
		var de *store.DuplicateJobError
		var re *store.RuleViolationError
		switch {
		case errors.Is(r.Err, store.ErrIdempotencyKeyConflict):
			tokens[i] = "C"
		case errors.As(r.Err, &de):
			tokens[i] = "D" + names[de.JobID]
		case errors.As(r.Err, &re):
			tokens[i] = "V" + names[re.JobID]
		case r.Err != nil:
			tokens[i] = r.Err.Error()
		case r.Deduplicated:
			tokens[i] = map[bool]string{false: "H", true: "M"}[r.PayloadMismatch] + names[r.JobID]
			if r.Replaced {
				tokens[i] += "*"
			}
		default:
			tokens[i] = "N"
		}
	}
	return strings.Join(tokens, " ")
}

// holds renders what g holds: its new jobs, the records it writes or hit,
// and the stored records it replaces.
func holds(g *Group, names map[store.JobID]string) (news, records, expired string) {
	keyName := func(k Key) string {
		if IsRuleQueue(k.Queue) {
			return "r:" + k.Key
		}
		return k.Key
	}
	var n, r, x []string
	for _, j := range g.New {
		n = append(n, names[j.ID])
	}
	for k, e := range g.Records {
		if !e.Created && e.Hits == 0 {
			continue
		}
		s := keyName(k) + ":" + names[e.JobID]
		if e.Hits > 0 {
			s += fmt.Sprintf("+%d", e.Hits)
		}
		r = append(r, s)
	}
	slices.Sort(r)
	for _, k := range g.Expired {
		x = append(x, keyName(k))
	}
	return strings.Join(n, " "), strings.Join(r, " "), strings.Join(x, " ")
}

func one(jobs ...[]spec) []decideCall { return []decideCall{{jobs: jobs}} }

func atomicCall(jobs ...[]spec) []decideCall { return []decideCall{{atomic: true, jobs: jobs}} }

func TestDecide(t *testing.T) {
	t.Parallel()
	live, expired := []stored{{"k", time.Second}}, []stored{{"k", 0}}
	heldRule := []stored{{"r:x", time.Second}}
	tests := []struct {
		name    string
		stored  []stored
		horizon int64 // 0: none
		calls   []decideCall
		answers []string
		news    string
		records string
		expired string
	}{
		// A job's key.
		{name: "a new key creates", calls: one(kj("k")), answers: []string{"N"}, news: "0", records: "k:0"},
		{name: "a live record is a hit on its job", stored: live, calls: one(kj("k")), answers: []string{"Hs"}, records: "k:s+1"},
		{name: "a record at its expiry is absent: the job replaces it", stored: expired, calls: one(kj("k")),
			answers: []string{"N"}, news: "0", records: "k:0", expired: "k"},
		{name: "another payload: a hit flagged as a mismatch", stored: live, calls: one(kj("k", payload("x"))),
			answers: []string{"Ms"}, records: "k:s+1"},
		{name: "reject_mismatch: another payload is refused", stored: live, calls: one(kj("k", payload("x"), rejectMismatch)),
			answers: []string{"C"}},
		{name: "reject_mismatch: the same payload is a hit", stored: live, calls: one(kj("k", rejectMismatch)),
			answers: []string{"Hs"}, records: "k:s+1"},
		{name: "reject_duplicate: refused, naming the original", stored: live, calls: one(kj("k", rejectDuplicate)),
			answers: []string{"Ds"}},
		{name: "unkeyed jobs never hit", calls: one(nil, nil), answers: []string{"N N"}, news: "0 1"},

		// The same key twice.
		{name: "the same key twice: the second is a hit on the first", calls: one(kj("k"), kj("k")),
			answers: []string{"N H0"}, news: "0", records: "k:0+1"},
		{name: "the same key twice after expiry", stored: expired, calls: one(kj("k"), kj("k")),
			answers: []string{"N H0"}, news: "0", records: "k:0+1", expired: "k"},
		{name: "the same key twice with another payload", calls: one(kj("k"), kj("k", payload("x"))),
			answers: []string{"N M0"}, news: "0", records: "k:0+1"},
		{name: "the same key twice on reject_mismatch", calls: one(kj("k"), kj("k", payload("x"), rejectMismatch)),
			answers: []string{"N C"}, news: "0", records: "k:0"},

		// Atomic calls.
		{name: "atomic with hits", stored: live, calls: atomicCall(kj("a"), kj("k")),
			answers: []string{"N Hs"}, news: "0", records: "a:0 k:s+1"},
		{name: "atomic: a refusal fails the call and leaves nothing", stored: live,
			calls: atomicCall(kj("a"), kj("k"), kj("k", payload("x"), rejectMismatch)), answers: []string{"E2"}},
		{name: "atomic: a refusal by a job of the call", calls: atomicCall(kj("a"), kj("a", rejectDuplicate)), answers: []string{"E1"}},
		{name: "atomic: a rule refusal fails the call", calls: atomicCall(kj("a", rule("x")), kj("b", rule("x"))), answers: []string{"E1"}},

		// Uniqueness rules.
		{name: "a rule key held by a live record refuses, and the job writes nothing", stored: heldRule,
			calls: one(kj("k", rule("x"))), answers: []string{"Vs"}},
		{name: "a rule key at its expiry is free", stored: []stored{{"r:x", 0}}, calls: one(kj("k", rule("x"))),
			answers: []string{"N"}, news: "0", records: "k:0 r:x:0", expired: "r:x"},
		{name: "an earlier job of the call holds a rule key against a later one", calls: one(kj("a", rule("x")), kj("b", rule("x"))),
			answers: []string{"N V0"}, news: "0", records: "a:0 r:x:0"},
		{name: "unkeyed jobs are held to rules", calls: one([]spec{rule("x")}, []spec{rule("x")}),
			answers: []string{"N V0"}, news: "0", records: "r:x:0"},
		{name: "the first rule held is named", stored: heldRule, calls: one(kj("a", rule("y")), kj("b", rule("y"), rule("x"))),
			answers: []string{"N V0"}, news: "0", records: "a:0 r:y:0"},
		{name: "a refused job leaves its key free for a later job", stored: heldRule,
			calls: one(kj("k", rule("x")), kj("k", rule("w"))), answers: []string{"Vs N"}, news: "1", records: "k:1 r:w:1"},
		{name: "a refused job leaves its other rule keys free", stored: heldRule,
			calls: one(kj("a", rule("y"), rule("x")), kj("b", rule("y"))), answers: []string{"Vs N"}, news: "1", records: "b:1 r:y:1"},
		{name: "a refused job holds neither its key nor its rule keys", stored: heldRule,
			calls: one(kj("a", rule("x")), kj("a"), kj("b", rule("x"))), answers: []string{"Vs N Vs"}, news: "1", records: "a:1"},
		{name: "a hit is not held to the rules", stored: []stored{{"k", time.Second}, {"r:x", time.Second}},
			calls: one(kj("k", rule("x"))), answers: []string{"Hs"}, records: "k:s+1"},

		// The horizon.
		{name: "a call at the horizon fails whole", horizon: t0.UnixMicro(), calls: one(nil, kj("k")), answers: []string{"STALE"}},
		{name: "a call after the horizon is decided", horizon: t0.UnixMicro() - 1, calls: one(kj("k")), answers: []string{"N"}, news: "0", records: "k:0"},
		{name: "a call that reads no record ignores the horizon", horizon: t0.Add(time.Hour).UnixMicro(), calls: one(nil), answers: []string{"N"}, news: "0"},
		{name: "a call under a rule reads records", horizon: t0.Add(time.Hour).UnixMicro(), calls: one([]spec{rule("x")}), answers: []string{"STALE"}},

		// Calls of one group.
		{name: "a later call hits an earlier one's job", calls: []decideCall{{jobs: [][]spec{kj("k")}}, {jobs: [][]spec{kj("k")}}},
			answers: []string{"N", "H0"}, news: "0", records: "k:0+1"},
		{name: "a failed atomic call leaves nothing for the next",
			calls: []decideCall{
				{jobs: [][]spec{kj("k", rejectMismatch)}},
				{atomic: true, jobs: [][]spec{kj("fresh", rule("x")), kj("k", payload("x"), rejectMismatch)}},
				{jobs: [][]spec{kj("fresh", rule("x")), kj("k")}},
			},
			answers: []string{"N", "E1", "N H0"}, news: "0 3", records: "fresh:3 k:0+1 r:x:3"},
		{name: "a record an earlier call created, expired by a later call's clock, is written once",
			calls:   []decideCall{{jobs: [][]spec{kj("k", window(time.Second))}}, {at: 2 * time.Second, jobs: [][]spec{kj("k", window(time.Second))}}},
			answers: []string{"N", "N"}, news: "0 1", records: "k:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := storing(tt.stored...)
			g.Horizon = tt.horizon
			answers, _, names := decide(t, g, tt.calls)
			if !slices.Equal(answers, tt.answers) {
				t.Fatalf("answers %q, want %q", answers, tt.answers)
			}
			news, records, expired := holds(g, names)
			if news != tt.news || records != tt.records || expired != tt.expired {
				t.Fatalf("the group holds new %q, records %q, expired %q; want %q, %q, %q",
					news, records, expired, tt.news, tt.records, tt.expired)
			}
			wantCreated(t, g)
		})
	}
}

// wantCreated checks that g lists each record it created once.
func wantCreated(t *testing.T, g *Group) {
	t.Helper()
	n := 0
	for _, e := range g.Records {
		if e.Created {
			n++
		}
	}
	listed := map[Key]bool{}
	for _, k := range g.Created {
		if listed[k] || !g.Records[k].Created {
			t.Fatalf("Created lists %v twice, or a record not created", k)
		}
		listed[k] = true
	}
	if len(listed) != n {
		t.Fatalf("Created lists %d records, %d were created", len(listed), n)
	}
}

// original is the stored job of the record "k": available since before t0
// unless state says otherwise.
func original(state store.JobState) *Job {
	return &Job{ID: storedJob, Queue: "q", Payload: []byte("p"), State: state, RunAt: t0.Add(-time.Second).UnixMicro()}
}

// TestDecideReplace: a hit on a queue that replaces gives the waiting
// original the request's payload, and the record its fingerprint, whether
// the original is stored or a job of the group; a call that fails takes the
// replacement back.
func TestDecideReplace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		stored      bool // the record of "k" is stored, naming original
		original    *Job // nil: the job is gone
		calls       []decideCall
		answers     []string
		payload     string // of the original (stored, or else the group's first job) after the calls
		fingerprint string // the payload whose fingerprint the record of "k" holds
		replaced    int    // stored jobs to write
	}{
		{"a hit replaces a waiting stored job", true, original(store.JobStateAvailable),
			one(kj("k", payload("x"), replaces)), []string{"Ms*"}, "x", "x", 1},
		{"and a scheduled one", true, original(store.JobStateScheduled),
			one(kj("k", payload("x"), replaces)), []string{"Ms*"}, "x", "x", 1},
		{"a reserved job is returned unchanged", true, original(store.JobStateReserved),
			one(kj("k", payload("x"), replaces)), []string{"Ms"}, "p", "p", 0},
		{"a job that is gone: nothing waits", true, nil,
			one(kj("k", payload("x"), replaces)), []string{"Ms"}, "", "p", 0},
		{"the replacing payload is no mismatch for the next hit; the job is written once", true, original(store.JobStateAvailable),
			one(kj("k", payload("x"), replaces), kj("k", payload("x"), replaces)), []string{"Ms* Hs*"}, "x", "x", 1},
		{"a later job of the call replaces an earlier one", false, nil,
			one(kj("k", replaces), kj("k", payload("x"), replaces)), []string{"N M0*"}, "x", "x", 0},
		{"a failed atomic call takes its replacement back", true, original(store.JobStateAvailable),
			atomicCall(kj("k", payload("x"), replaces), kj("k", payload("y"), rejectMismatch)), []string{"E1"}, "p", "p", 0},
		{"a failed atomic call takes back its replacement of an earlier call's job", false, nil,
			[]decideCall{{jobs: [][]spec{kj("k", replaces)}},
				{atomic: true, jobs: [][]spec{kj("k", payload("x"), replaces), kj("k", payload("y"), rejectMismatch)}}},
			[]string{"N", "E1"}, "p", "p", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewGroup()
			if tt.stored {
				g = storing(stored{"k", time.Hour})
				g.Records[Key{"q", "k"}].Original = tt.original
			}
			answers, first, _ := decide(t, g, tt.calls)
			if !slices.Equal(answers, tt.answers) {
				t.Fatalf("answers %q, want %q", answers, tt.answers)
			}
			o := tt.original
			if !tt.stored {
				o = first
			}
			if o != nil && string(o.Payload) != tt.payload {
				t.Fatalf("the original's payload %q, want %q", o.Payload, tt.payload)
			}
			if len(g.Replaced) != tt.replaced || (tt.replaced > 0 && g.Replaced[0] != tt.original) {
				t.Fatalf("%d stored jobs replaced, want %d", len(g.Replaced), tt.replaced)
			}
			if e := g.Records[Key{"q", "k"}]; e != nil && e.Fingerprint != store.NewFingerprint("t", []byte(tt.fingerprint)) {
				t.Fatalf("the record's fingerprint is not that of %q", tt.fingerprint)
			}
		})
	}
}

// TestDecideDebounce: a hit on a debouncing queue moves the waiting job's
// run-at to the hit's now + the delay (Replacement), and the job becomes
// scheduled.
func TestDecideDebounce(t *testing.T) {
	t.Parallel()
	now := t0.UnixMicro()
	g := NewGroup()
	k, e := stored{"k", time.Hour}.entry()
	e.Original = original(store.JobStateAvailable)
	g.Records[k] = e
	j, err := Prepare(&store.EnqueueJob{Queue: "q", JobType: "t", IdempotencyKey: &k.Key, DedupWindow: time.Hour,
		Replace: true, Debounce: 10 * time.Second}, now)
	if err != nil {
		t.Fatal(err)
	}
	res := make([]store.EnqueueResult, 1)
	if err := g.Decide(false, now, []Job{j}, res); err != nil {
		t.Fatal(err)
	}
	want := t0.Add(10 * time.Second)
	if !res[0].Replaced || !res[0].RunAt.Equal(want) || e.Original.RunAt != want.UnixMicro() || e.Original.State != store.JobStateScheduled {
		t.Fatalf("result %+v, original %+v; want it scheduled at %v", res[0], e.Original, want)
	}
}

// TestKeys: every distinct key once, in job order, with the record its
// first job creates; Replacing names the keys of the jobs that replace.
func TestKeys(t *testing.T) {
	t.Parallel()
	now := t0.UnixMicro()
	var jobs []Job
	for _, ej := range []store.EnqueueJob{
		{IdempotencyKey: key("a"), Replace: true},
		{IdempotencyKey: key("a")},
		{Rules: []store.RuleKey{{Name: "r", Key: "x", Window: time.Minute}}},
		{IdempotencyKey: key("b"), Rules: []store.RuleKey{{Name: "r", Key: "x", Window: time.Second}}},
	} {
		ej.Queue, ej.DedupWindow = "q", time.Hour
		j, err := Prepare(&ej, now)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	var keys []Key
	var firsts []Record
	seen := map[Key]bool{}
	Keys(jobs, now, seen, func(k Key, first Record) {
		keys = append(keys, k)
		firsts = append(firsts, first)
	})
	rx := Key{RuleQueue("q", "r"), "x"}
	if !slices.Equal(keys, []Key{{"q", "a"}, rx, {"q", "b"}}) {
		t.Fatalf("keys %v", keys)
	}
	if firsts[0] != NewRecord(&jobs[0], now) || firsts[1] != RuleRecord(&jobs[2], &jobs[2].Rules[0], now) ||
		firsts[1].ExpiresAt != now+time.Minute.Microseconds() || firsts[2] != NewRecord(&jobs[3], now) {
		t.Fatalf("first records %+v", firsts)
	}
	Keys(jobs, now, seen, func(k Key, _ Record) { t.Fatalf("%v visited twice in one group", k) })
	var replacing []Key
	Originals(jobs, func(k Key) { replacing = append(replacing, k) })
	if !slices.Equal(replacing, []Key{{"q", "a"}}) {
		t.Fatalf("Replacing named %v", replacing)
	}
}
