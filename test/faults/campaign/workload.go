package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/sepp-dev/sepp"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/outbox"
	"github.com/sepp-dev/sepp/test/faults/history"
)

// The queues of the campaign, one per dedup policy it checks; the nodes'
// config (cluster.go) and the history's state section both come from here.
var campaignQueues = []history.QueuePolicy{
	{Queue: "orders"},                                // return_original, a window longer than the run
	{Queue: "mail", OnDuplicate: "reject"},           // a second enqueue of a key fails with DUPLICATE_JOB
	{Queue: "digest", OnDuplicate: "replace"},        // a hit replaces the payload of a job not yet taken
	{Queue: "ticks", DedupWindowMS: tickWindowMS},    // windows that end during the run
	{Queue: "plain", OnDuplicate: "return_original"}, // unkeyed jobs
	// A uniqueness rule: one job per account within the rule's window,
	// whatever its idempotency key.
	{Queue: "payments", RuleWindowMS: ruleWindowMS},
	// Debounce: a job runs debounceMS after the last request that created or
	// replaced it.
	{Queue: "nudges", OnDuplicate: "debounce", DebounceMS: debounceMS, DedupWindowMS: 2000},
	// Run again: a key enqueued while its job runs gets one follow-up, which
	// runs once the running job has ended. Few keys, reused while their jobs
	// run (the handler takes a while), and a window longer than a run.
	{Queue: "rerun", WhenRunning: "run_again", DedupWindowMS: 5000},
	// Per-key concurrency: one job of an account at a time, in enqueue
	// order; and two at a time, in any order.
	{Queue: "serial", ConcurrencyLimit: 1, ConcurrencyOrdered: true},
	{Queue: "pairs", ConcurrencyLimit: 2},
	// Rules with a limit: three jobs per account within 2 s, the others
	// refused; and two per account within 1 s, the others delayed.
	{Queue: "bursts", RuleWindowMS: 2000, RuleLimit: 3},
	{Queue: "spread", RuleWindowMS: 1000, RuleLimit: 2, RuleAction: "delay"},
	// Per-key rate: at most three jobs of an account reserved within 1 s.
	{Queue: "metered", RateLimit: 3, RatePeriodMS: 1000},
	// The outbox's: filled only by the relays, from rows the producers
	// write into the app database (outboxTx), keyed by each row's id or its
	// own key; return_original, with the default window.
	{Queue: outboxQueue},
}

const (
	// outboxQueue is the queue of the outbox rows; refusedQueue, a queue
	// no node declares (strict = true), whose rows the relay must move to
	// the dead table.
	outboxQueue  = "outboxed"
	refusedQueue = "outbox-nowhere"
	// outboxKeys is how many keys the rows with their own key draw from:
	// few, so keys repeat across rows and transactions.
	outboxKeys = 200
	// appTxTimeout bounds an outbox transaction, from its BEGIN to its
	// COMMIT.
	appTxTimeout = 5 * time.Second
)

// accountsOf is how many accounts the payloads of a queue with per-account
// rules, concurrency or rate spread over: few enough that a key's limit
// is reached.
var accountsOf = map[string]int{"payments": accounts, "bursts": 10, "spread": 30, "serial": 8, "pairs": 5, "metered": 6}

// rerunKeys is how many keys the run_again queue's jobs have.
const rerunKeys = 8

const (
	// The window of the "ticks" queue: short, so keys are created again
	// after it ends while faults go on.
	tickWindowMS = 3000
	// The window of the rule of the "payments" queue, and its accounts.
	ruleWindowMS = 3000
	accounts     = 20
	// The debounce_ms of the "nudges" queue.
	debounceMS = 500
	// Every queue's lease: short, so paused and partitioned workers lose
	// theirs and jobs are delivered again.
	leaseMS = 2000
	// The scope of every effect the handlers claim.
	effectScope = "fx"
)

// The window the history's state section reports for a queue whose config
// leaves the default (24 h): longer than any run, so taken as unbounded.
var keyedQueues = []string{"orders", "mail", "digest", "ticks", "payments", "nudges", "rerun", "serial", "pairs", "bursts", "spread", "metered"}

// policyOf is the campaign's policy of queue.
func policyOf(queue string) history.QueuePolicy {
	for _, q := range campaignQueues {
		if q.Queue == queue {
			return q
		}
	}
	return history.QueuePolicy{Queue: queue}
}

// client is one client process of the history: it runs one operation at a
// time against one node, and moves to the next node after an operation of
// unknown outcome (as a client behind a load balancer would).
type client struct {
	id    int
	rng   *rand.Rand
	w     *history.Writer
	nodes []nodeConn
	home  int
	seq   int
	keys  int // the key space of each queue
	think time.Duration
	turn  int // the queue a worker reserves from next
	ops   *atomic.Int64
	seen  *keySet
	app   *sql.DB // the outbox's app database; nil: no outbox rows
}

type nodeConn struct {
	conn    *grpc.ClientConn
	jobs    seppv1.JobServiceClient
	workers seppv1.WorkerServiceClient
	effects seppv1.EffectServiceClient
	admin   seppv1.AdminServiceClient
}

func dial(addr string) (nodeConn, error) {
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// The server tolerates pings every 5 s; a cut link is noticed in 7.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 2 * time.Second, PermitWithoutStream: true}),
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: time.Second}))
	if err != nil {
		return nodeConn{}, err
	}
	return nodeConn{conn: conn, jobs: seppv1.NewJobServiceClient(conn), workers: seppv1.NewWorkerServiceClient(conn),
		effects: seppv1.NewEffectServiceClient(conn), admin: seppv1.NewAdminServiceClient(conn)}, nil
}

// callTimeout bounds every call; a call that runs out is of unknown outcome.
const callTimeout = 3 * time.Second

func (c *client) node() nodeConn { return c.nodes[c.home%len(c.nodes)] }

// record runs call against the client's node and writes its record with the
// outcome the error gives. call fills in what the answer says.
func (c *client) record(r history.Record, call func(ctx context.Context, n nodeConn, r *history.Record) error) history.Record {
	c.seq++
	// The id names the node the call went to: p3-17@n1.
	r.Process, r.ID = c.id, fmt.Sprintf("p%d-%d@n%d", c.id, c.seq, c.home%len(c.nodes))
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	r.Start = history.At(time.Now())
	err := call(ctx, c.node(), &r)
	r.End = history.At(time.Now())
	cancel()
	if err == nil {
		r.Outcome = history.OK
	} else {
		r.Outcome, r.Reason = classify(err)
		if jobID := errorMeta(err, "job_id"); jobID != "" && r.Reason == "DUPLICATE_JOB" {
			r.JobID = jobID
		}
		if r.Outcome == history.Unknown {
			c.home++ // try another node next
		}
	}
	_ = c.w.Write(r)
	c.ops.Add(1)
	return r
}

// classify tells a definite refusal (the call did not take effect) from an
// answer that leaves its effect unknown: a timeout, a lost connection, a
// store that failed mid-commit.
func classify(err error) (history.Outcome, string) {
	st, _ := status.FromError(err)
	reason := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.GetReason()
		}
	}
	if reason == "" {
		reason = st.Code().String()
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Internal, codes.Unknown, codes.Aborted, codes.DataLoss:
		return history.Unknown, reason
	}
	return history.Fail, reason
}

func errorMeta(err error, key string) string {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetMetadata()[key]
		}
	}
	return ""
}

// payloadFor is the payload of an enqueue: fixed per (queue, key) except on
// the replace queue, where every request brings new content.
func (c *client) payloadFor(queue, key string) []byte {
	if n := accountsOf[queue]; n > 0 {
		return []byte(fmt.Sprintf(`{"account":%q,"key":%q}`, accountIn(key, n), key))
	}
	if queue == "digest" || queue == "nudges" {
		return []byte(fmt.Sprintf(`{"key":%q,"from":"p%d-%d"}`, key, c.id, c.seq+1))
	}
	return []byte(fmt.Sprintf(`{"queue":%q,"key":%q}`, queue, key))
}

// accountOf is the account a payment key pays from: fixed per key, so a
// retry is the same payment, and shared by many keys, so the rule refuses.
func accountOf(key string) string { return accountIn(key, accounts) }

// accountIn is the account of key among n.
func accountIn(key string, n int) string {
	h := fnv.New32a()
	h.Write([]byte(key))
	return "acc-" + strconv.Itoa(int(h.Sum32()%uint32(n)))
}

// ruleKeyOf is the rule key a job of queue with key has in the history (the
// account; the server derives its own form of it from the payload).
func ruleKeyOf(queue, key string) string {
	if policyOf(queue).RuleWindowMS == 0 {
		return ""
	}
	return accountIn(key, accountsOf[queue])
}

// flowKeysOf are the concurrency and rate keys the history gives a job of
// queue with payload: its account, read from the payload as the server's
// key_fields read it, on a queue with [queues.concurrency] or
// [queues.rate].
func flowKeysOf(queue string, payload []byte) (conc, rate string) {
	p := policyOf(queue)
	if p.ConcurrencyLimit == 0 && p.RateLimit == 0 {
		return "", ""
	}
	var v struct {
		Account string `json:"account"`
	}
	if json.Unmarshal(payload, &v) != nil || v.Account == "" {
		v.Account = "(none)"
	}
	if p.ConcurrencyLimit > 0 {
		conc = v.Account
	}
	if p.RateLimit > 0 {
		rate = v.Account
	}
	return conc, rate
}

// ackFlow records what an enqueue ack says of follow-ups and delays.
func ackFlow(a *seppv1.EnqueueResponse) (follows string, delayed history.Time) {
	if a.GetDelayedUntil() != nil {
		delayed = history.At(a.GetDelayedUntil().AsTime())
	}
	return a.GetFollowsJobId(), delayed
}

func (c *client) pickKey(queue string) string {
	n := c.keys
	switch queue {
	case "ticks", "nudges":
		n = 50 // few keys, enqueued again and again: across windows, while waiting
	case "rerun":
		n = rerunKeys // enqueued again while their jobs run
	}
	return "k" + strconv.Itoa(c.rng.IntN(n))
}

func enqueueRequest(queue, key string, payload []byte) *seppv1.EnqueueRequest {
	req := &seppv1.EnqueueRequest{Queue: queue, JobType: "work", Payload: payload, MaxAttempts: 50}
	if key != "" {
		req.IdempotencyKey = &key
	}
	return req
}

// enqueueKeyed enqueues one keyed job, resending the same request after
// every answer of unknown outcome, as a producer that must not lose the
// job would; each try is its own operation in the history.
func (c *client) enqueueKeyed(stop <-chan struct{}) {
	queue := keyedQueues[c.rng.IntN(len(keyedQueues))]
	key := c.pickKey(queue)
	payload := c.payloadFor(queue, key)
	c.seen.add(queue, key)
	conc, rate := flowKeysOf(queue, payload)
	for try := 0; try < 8; try++ {
		r := c.record(history.Record{Op: history.OpEnqueue, Queue: queue, Key: key, JobType: "work", Payload: history.Fingerprint(payload), RuleKey: ruleKeyOf(queue, key),
			ConcKey: conc, RateKey: rate},
			func(ctx context.Context, n nodeConn, r *history.Record) error {
				res, err := n.jobs.Enqueue(ctx, enqueueRequest(queue, key, payload))
				if err == nil {
					r.JobID, r.Deduplicated, r.Replaced = res.GetJobId(), res.GetDeduplicated(), res.GetReplaced()
					r.FollowsJobID, r.DelayedUntil = ackFlow(res)
				}
				return err
			})
		if r.Outcome != history.Unknown || !c.pause(stop) {
			return
		}
	}
}

// pause waits 50 to 250 ms before a resend; false when stop came first.
func (c *client) pause(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return false
	case <-time.After(time.Duration(50+c.rng.IntN(200)) * time.Millisecond):
		return true
	}
}

func (c *client) enqueuePlain() {
	payload := []byte(fmt.Sprintf(`{"from":"p%d-%d"}`, c.id, c.seq+1))
	c.record(history.Record{Op: history.OpEnqueue, Queue: "plain", JobType: "work", Payload: history.Fingerprint(payload)},
		func(ctx context.Context, n nodeConn, r *history.Record) error {
			res, err := n.jobs.Enqueue(ctx, enqueueRequest("plain", "", payload))
			if err == nil {
				r.JobID, r.Deduplicated = res.GetJobId(), res.GetDeduplicated()
			}
			return err
		})
}

// enqueueBatch sends 2 to 6 keyed jobs in one call, atomic or not, resent
// whole after an unknown outcome.
func (c *client) enqueueBatch(stop <-chan struct{}) {
	atomicBatch := c.rng.IntN(2) == 0
	n := 2 + c.rng.IntN(5)
	req := &seppv1.EnqueueBatchRequest{Atomic: atomicBatch}
	items := make([]history.Item, n)
	// One batch in four may hold jobs of the reject queue, whose repeats
	// fail (and fail an atomic batch whole); the others must succeed.
	// (The metered queue's jobs come one at a time, so its keys' backlog
	// stays near what their rate lets through.)
	queues := []string{"orders", "mail", "digest", "ticks", "payments", "nudges", "rerun", "serial", "pairs", "bursts", "spread"}
	if c.rng.IntN(4) != 0 {
		queues = []string{"orders", "digest", "ticks", "nudges", "rerun", "serial", "pairs", "spread"}
	}
	for i := range items {
		queue := queues[c.rng.IntN(len(queues))]
		key := c.pickKey(queue)
		payload := c.payloadFor(queue, key)
		c.seen.add(queue, key)
		req.Jobs = append(req.Jobs, enqueueRequest(queue, key, payload))
		conc, rate := flowKeysOf(queue, payload)
		items[i] = history.Item{Queue: queue, Key: key, JobType: "work", Payload: history.Fingerprint(payload), RuleKey: ruleKeyOf(queue, key),
			ConcKey: conc, RateKey: rate}
	}
	for try := 0; try < 8; try++ {
		rec := history.Record{Op: history.OpEnqueueBatch, Atomic: atomicBatch, Items: append([]history.Item(nil), items...)}
		r := c.record(rec, func(ctx context.Context, nc nodeConn, r *history.Record) error {
			res, err := nc.jobs.EnqueueBatch(ctx, req)
			if err != nil {
				return err
			}
			if len(res.GetResults()) != len(r.Items) {
				return status.Errorf(codes.Internal, "%d results for %d jobs", len(res.GetResults()), len(r.Items))
			}
			for i, it := range res.GetResults() {
				if e := it.GetError(); e != nil {
					r.Items[i].Outcome, r.Items[i].Reason = history.Fail, e.GetReason()
					if e.GetReason() == "DUPLICATE_JOB" {
						r.Items[i].JobID = e.GetMetadata()["job_id"]
					}
					continue
				}
				a := it.GetAck()
				r.Items[i].Outcome, r.Items[i].JobID = history.OK, a.GetJobId()
				r.Items[i].Deduplicated, r.Items[i].Replaced = a.GetDeduplicated(), a.GetReplaced()
				r.Items[i].FollowsJobID, r.Items[i].DelayedUntil = ackFlow(a)
			}
			return nil
		})
		if r.Outcome != history.Unknown || !c.pause(stop) {
			return
		}
	}
}

// effectKeyOf is the effect a job's handler guards: jobs of the orders and
// mail queues with one key share their effect (a charge and its receipt
// mail must not both charge), the others have one each.
func effectKeyOf(job *seppv1.Job) string {
	key := job.GetIdempotencyKey()
	switch {
	case key == "":
		return job.GetQueue() + "/" + job.GetJobId()
	case job.GetQueue() == "orders" || job.GetQueue() == "mail":
		return "order/" + key
	case policyOf(job.GetQueue()).WhenRunning != "" || policyOf(job.GetQueue()).ConcurrencyLimit > 0 ||
		policyOf(job.GetQueue()).RuleLimit > 0 || policyOf(job.GetQueue()).RateLimit > 0:
		// The flow queues' jobs each run their own effect: a follow-up runs
		// again what its original ran.
		return job.GetQueue() + "/" + job.GetJobId()
	}
	return job.GetQueue() + "/" + key
}

// work reserves one job and handles it: claim its effect, run it (complete
// the effect), complete the job. Now and then the handler "crashes" (drops
// the job without a word, so its lease runs out) or fails the attempt.
// It reports whether it found a job.
func (c *client) work() bool {
	var job *seppv1.ReservedJob
	// Mostly one queue a call, in turn, as workers subscribed to a queue
	// each; now and then every queue at once.
	queues, wait := allQueues(), int64(500)
	if c.rng.IntN(10) != 0 {
		queues, wait = []string{queues[c.turn%len(queues)]}, 100
		c.turn++
	}
	r := c.record(history.Record{Op: history.OpReserve},
		func(ctx context.Context, n nodeConn, r *history.Record) error {
			res, err := n.workers.Reserve(ctx, &seppv1.ReserveRequest{Queues: queues, WorkerId: fmt.Sprintf("p%d", c.id),
				MaxJobs: 1, LeaseMs: leaseMS, WaitMs: wait})
			if err == nil && len(res.GetJobs()) > 0 {
				job = res.GetJobs()[0]
				r.JobID, r.LeaseToken, r.Queue = job.GetJob().GetJobId(), job.GetLeaseToken(), job.GetJob().GetQueue()
				r.Key = job.GetJob().GetIdempotencyKey()
				r.ConcKey, r.RateKey = flowKeysOf(r.Queue, job.GetJob().GetPayload())
				if job.GetLeaseExpiresAt() != nil {
					r.LeaseExpiresAt = history.At(job.GetLeaseExpiresAt().AsTime())
				}
			}
			return err
		})
	if r.Outcome != history.OK || job == nil {
		return false
	}
	jobID, lease := job.GetJob().GetJobId(), job.GetLeaseToken()
	effKey := effectKeyOf(job.GetJob())
	c.seen.addEffect(effKey)
	var claim *seppv1.ClaimEffectResponse
	cr := c.record(history.Record{Op: history.OpClaimEffect, Scope: effectScope, Key: effKey, JobID: jobID},
		func(ctx context.Context, n nodeConn, r *history.Record) error {
			res, err := n.effects.ClaimEffect(ctx, &seppv1.ClaimEffectRequest{Scope: effectScope, Key: effKey, LeaseMs: leaseMS})
			if err == nil {
				claim = res
				r.EffectOutcome = effectOutcome(res.GetOutcome())
				r.EffectToken = res.GetToken()
				r.EffectResult = string(res.GetResult())
			}
			return err
		})
	if cr.Outcome != history.OK {
		return true // the lease runs out; the job is delivered again
	}
	switch claim.GetOutcome() {
	case seppv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED:
		time.Sleep(c.effectTime(job.GetJob().GetQueue())) // the effect itself
		if c.rng.IntN(50) == 0 {                          // the effect failed: give the claim back, retry the job
			c.record(history.Record{Op: history.OpReleaseEffect, Scope: effectScope, Key: effKey, JobID: jobID, EffectToken: claim.GetToken()},
				func(ctx context.Context, n nodeConn, r *history.Record) error {
					_, err := n.effects.ReleaseEffect(ctx, &seppv1.ReleaseEffectRequest{Token: claim.GetToken()})
					return err
				})
			c.fail(jobID, lease, "effect failed")
			return true
		}
		result := fmt.Sprintf("done by p%d-%d", c.id, c.seq)
		ok := false
		for try := 0; try < 3 && !ok; try++ {
			rec := c.record(history.Record{Op: history.OpCompleteEffect, Scope: effectScope, Key: effKey, JobID: jobID, EffectToken: claim.GetToken()},
				func(ctx context.Context, n nodeConn, r *history.Record) error {
					res, err := n.effects.CompleteEffect(ctx, &seppv1.CompleteEffectRequest{Token: claim.GetToken(), Result: []byte(result)})
					if err == nil {
						r.EffectResult = string(res.GetResult())
					}
					return err
				})
			ok = rec.Outcome == history.OK
			if rec.Outcome == history.Fail {
				break
			}
		}
		if !ok {
			return true // not known to be done: leave the job to its lease
		}
	case seppv1.ClaimOutcome_CLAIM_OUTCOME_COMPLETED:
		// done before, by this job's earlier attempt or another job
	default: // IN_PROGRESS: someone else runs it now; try again later
		c.fail(jobID, lease, "effect in progress elsewhere")
		return true
	}
	switch x := c.rng.IntN(100); {
	case x < 4: // the handler crashes after the effect: the lease runs out
		return true
	case x < 7:
		c.fail(jobID, lease, "handler error")
		return true
	}
	for try := 0; try < 3; try++ {
		rec := c.record(history.Record{Op: history.OpComplete, JobID: jobID, LeaseToken: lease},
			func(ctx context.Context, n nodeConn, r *history.Record) error {
				_, err := n.workers.Complete(ctx, &seppv1.CompleteRequest{JobId: jobID, LeaseToken: lease, Result: []byte("ok")})
				return err
			})
		if rec.Outcome != history.Unknown {
			break
		}
	}
	return true
}

// effectTime is how long the effect of a job of queue takes: up to 20 ms;
// longer on the run_again queue, whose keys are enqueued again while their
// jobs run, and on the limit-2 concurrency queue, whose jobs then overlap.
func (c *client) effectTime(queue string) time.Duration {
	switch queue {
	case "rerun":
		return time.Duration(50+c.rng.IntN(200)) * time.Millisecond
	case "pairs":
		return time.Duration(20+c.rng.IntN(60)) * time.Millisecond
	}
	return time.Duration(c.rng.IntN(20)) * time.Millisecond
}

func (c *client) fail(jobID, lease, msg string) {
	retry := int64(100)
	c.record(history.Record{Op: history.OpFail, JobID: jobID, LeaseToken: lease},
		func(ctx context.Context, n nodeConn, r *history.Record) error {
			_, err := n.workers.Fail(ctx, &seppv1.FailRequest{JobId: jobID, LeaseToken: lease, Error: msg, RetryAfterMs: &retry})
			return err
		})
}

func effectOutcome(o seppv1.ClaimOutcome) string {
	switch o {
	case seppv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED:
		return history.EffectAcquired
	case seppv1.ClaimOutcome_CLAIM_OUTCOME_COMPLETED:
		return history.EffectCompleted
	case seppv1.ClaimOutcome_CLAIM_OUTCOME_IN_PROGRESS:
		return history.EffectInProgress
	}
	return o.String()
}

func allQueues() []string {
	qs := make([]string, len(campaignQueues))
	for i, q := range campaignQueues {
		qs[i] = q.Queue
	}
	return qs
}

// produce runs a producer until stop: keyed enqueues with retries, batches
// atomic and not, now and then an unkeyed job.
func (c *client) produce(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		if c.think > 0 {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(c.rng.Int64N(2 * int64(c.think)))):
			}
		}
		if c.app != nil && c.rng.IntN(8) == 0 {
			c.outboxTx()
			continue
		}
		switch x := c.rng.IntN(10); {
		case x < 6:
			c.enqueueKeyed(stop)
		case x < 9:
			c.enqueueBatch(stop)
		default:
			c.enqueuePlain()
		}
	}
}

// outboxTx writes 1 to 5 rows into the outbox table with the Go writer
// (outbox.Enqueue) in one transaction of the app database, and commits it,
// or, one time in six, rolls it back on purpose. Three rows in ten bring
// their own key, drawn from outboxKeys (so rows share keys, within a
// transaction and across), the others are keyed by their ids; one row in
// thirty goes to a queue no node declares, which the relays must refuse
// for good. One commit in ten runs under a deadline of 0 to 1 ms, as an
// app's request deadline may run out while its COMMIT is on the wire: the
// transaction may or may not have committed. The history records the rows
// (ids, keys, payloads) and the transaction's outcome: ok (Commit returned
// nil), fail (rolled back: on purpose, or after an error before COMMIT was
// sent), unknown (Commit failed: a PostgreSQL restart, that deadline).
func (c *client) outboxTx() {
	c.seq++
	tag := fmt.Sprintf("p%d-%d", c.id, c.seq)
	r := history.Record{Process: c.id, ID: tag + "@app", Op: history.OpOutboxTx}
	n := 1 + c.rng.IntN(5)
	rollback := c.rng.IntN(6) == 0
	var deadline time.Duration = -1
	if c.rng.IntN(10) == 0 {
		deadline = time.Duration(c.rng.IntN(1000)) * time.Microsecond
	}
	reqs := make([]sepp.EnqueueRequest, n)
	rows := make([]history.OutboxRow, n)
	for i := range reqs {
		payload := []byte(fmt.Sprintf(`{"tx":%q,"row":%d}`, tag, i))
		req := sepp.EnqueueRequest{Queue: outboxQueue, JobType: "work", Payload: payload}
		if c.rng.IntN(10) < 3 {
			req.IdempotencyKey = sepp.Key("ok" + strconv.Itoa(c.rng.IntN(outboxKeys)))
		}
		rows[i] = history.OutboxRow{Queue: outboxQueue, JobType: "work", Payload: history.Fingerprint(payload)}
		if c.rng.IntN(30) == 0 {
			req.Queue, rows[i].Queue, rows[i].Refused = refusedQueue, refusedQueue, "UNKNOWN_QUEUE"
		}
		if req.IdempotencyKey != nil {
			rows[i].Key = *req.IdempotencyKey
		}
		reqs[i] = req
	}
	ctx, cancel := context.WithTimeout(context.Background(), appTxTimeout)
	defer cancel()
	r.Start = history.At(time.Now())
	tx, err := c.app.BeginTx(ctx, nil)
	if err != nil {
		r.Outcome, r.Reason = history.Fail, "begin: "+err.Error()
	} else {
		for i := range reqs {
			id, ierr := outbox.Enqueue(ctx, tx, reqs[i])
			if ierr != nil {
				err = ierr
				break
			}
			rows[i].ID = id
			r.Rows = append(r.Rows, rows[i])
		}
		switch {
		case err != nil:
			// COMMIT was never sent: the transaction cannot commit.
			_ = tx.Rollback()
			r.Outcome, r.Reason = history.Fail, "insert: "+err.Error()
		case rollback:
			r.Outcome, r.Reason = history.Fail, "ROLLBACK"
			if rerr := tx.Rollback(); rerr != nil {
				r.Reason += ": " + rerr.Error()
			}
		default:
			if deadline >= 0 {
				time.AfterFunc(deadline, cancel)
			}
			if cerr := tx.Commit(); cerr != nil {
				r.Outcome, r.Reason = history.Unknown, "commit: "+cerr.Error()
			} else {
				r.Outcome = history.OK
			}
		}
	}
	r.End = history.At(time.Now())
	_ = c.w.Write(r)
	c.ops.Add(1)
}

// consume runs a worker until stop.
func (c *client) consume(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		if !c.work() {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}
