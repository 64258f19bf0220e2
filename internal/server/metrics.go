package server

import (
	"context"
	"github.com/sepp-dev/sepp/internal/outboxrelay"
	"github.com/sepp-dev/sepp/internal/schedule"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sepp-dev/sepp/internal/store"
)

// Metrics are the server's Prometheus metrics, served at /metrics. Create
// them before the store so the store can report its commits (ObserveCommit).
type Metrics struct {
	registry  *prometheus.Registry
	outbox    *outboxrelay.Metrics // the [[outboxes]] relays'
	schedule  *schedule.Metrics    // the [[schedules]]' (schedules.go)
	enqueues  *prometheus.CounterVec
	dedupHits *prometheus.CounterVec
	// dedupOutcomes counts each keyed or ruled enqueue by what its dedup
	// policy decided, and (outcome released) each dedup record the store
	// deleted because its job reached a final state its release_key_on
	// names (ObserveKeyReleased).
	dedupOutcomes *prometheus.CounterVec
	reserved      prometheus.Counter
	completions   *prometheus.CounterVec
	leaseExpired  prometheus.Counter
	effectClaims  *prometheus.CounterVec
	commitTime    prometheus.Histogram
	commitJobs    prometheus.Histogram
	sweepDeleted  *prometheus.CounterVec
	recovered     *prometheus.GaugeVec
	damaged       prometheus.Gauge
	// storeUp is 1 while the store's last health probe succeeded
	// (probes.go), sweptAt the wall time of the sweeper's last successful
	// store call, so that alerts can see a store or a sweeper that stopped.
	storeUp prometheus.Gauge
	sweptAt prometheus.Gauge
	// longPollsRefused counts waiting calls refused by a [limits] bound
	// (limits.go); the waiting calls themselves are read at scrape time
	// (longPollGauges).
	longPollsRefused *prometheus.CounterVec
	// webhookRequests counts webhook requests by configured path and
	// answered status (webhook.go).
	webhookRequests *prometheus.CounterVec
	// queues decides the queue label values (queuelabels.go).
	queues *queueLabels
}

// NewMetrics creates the metrics in a registry of their own, with the Go
// runtime and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		queues:   newQueueLabels(),
		enqueues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_enqueues_total",
			Help: "Enqueued jobs by queue and outcome (created, deduplicated, rejected).",
		}, []string{"queue", "outcome"}),
		dedupHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_dedup_hits_total",
			Help: "Enqueues answered with an existing job because their idempotency key was recorded.",
		}, []string{"queue"}),
		dedupOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_dedup_outcomes_total",
			Help: "Enqueues with a key or a uniqueness rule, by what the queue's dedup policy decided: created, hit, mismatch (a hit with another payload), rejected (DUPLICATE_JOB, IDEMPOTENCY_KEY_CONFLICT), replaced, debounced, rule_violated, follow_up (when_running = \"run_again\" created a follow-up of a running job), delayed (a rule with action = \"delay\" scheduled the job for when its window has room); and released: dedup records deleted because their job reached a final state the queue's release_key_on names.",
		}, []string{"queue", "outcome"}),
		reserved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sepp_jobs_reserved_total",
			Help: "Deliveries: jobs handed to workers by Reserve.",
		}),
		completions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_job_outcomes_total",
			Help: "Ends of deliveries reported by workers: completed, retried (failed with attempts left) or dead.",
		}, []string{"outcome"}),
		leaseExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sepp_lease_expiries_total",
			Help: "Leases that ended without Complete, Fail or ExtendLease, found by the sweeper.",
		}),
		effectClaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_effect_claims_total",
			Help: "ClaimEffect answers by outcome: acquired, completed (replayed) or in_progress.",
		}, []string{"outcome"}),
		commitTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sepp_store_commit_seconds",
			Help:    "Duration of one group commit of the store, fsync included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		commitJobs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sepp_store_commit_jobs",
			Help:    "Jobs carried by one group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}),
		sweepDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_sweep_deleted_total",
			Help: "Rows deleted by the sweeper: expired dedup records, jobs past retention and effect records past their TTL.",
		}, []string{"kind"}),
		recovered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sepp_store_recovered",
			Help: "What the store replayed when it opened: wal_files, wal_batches and wal_keys replayed from its write-ahead log, dedup_records found (embedded Pebble store only).",
		}, []string{"what"}),
		damaged: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sepp_store_recovery_damaged",
			Help: "Things the store found damaged and dropped when it opened (a torn or damaged write-ahead log record); 0 when nothing was.",
		}),
		webhookRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_webhook_requests_total",
			Help: "Requests to the [[webhooks]] paths by path and HTTP status answered (202 new job, 200 retry, 401 bad signature, ...).",
		}, []string{"path", "status"}),
		storeUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sepp_store_up",
			Help: "1 while the store answers the health check's read (every 5 s), 0 while it fails: the node then answers NOT_SERVING and its calls fail UNAVAILABLE.",
		}),
		sweptAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sepp_sweep_last_success_timestamp_seconds",
			Help: "When the sweeper's last store call succeeded (Unix seconds); the node's start until the first. It stops moving while sweeps fail.",
		}),
		longPollsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_long_polls_refused_total",
			Help: "Waiting calls (Reserve, ClaimEffect with wait_ms > 0) refused with LIMIT_EXCEEDED, by the limit they were over: max_long_polls, max_long_polls_per_client or max_long_polls_per_connection.",
		}, []string{"limit"}),
	}
	m.storeUp.Set(1) // the store opened before the server starts
	m.sweptAt.SetToCurrentTime()
	for _, l := range longPollLimits {
		m.longPollsRefused.WithLabelValues(l)
	}
	m.registry.MustRegister(m.enqueues, m.dedupHits, m.dedupOutcomes, m.reserved, m.completions, m.leaseExpired, m.effectClaims, m.commitTime, m.commitJobs, m.sweepDeleted, m.recovered, m.damaged, m.webhookRequests,
		m.storeUp, m.sweptAt, m.longPollsRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.outbox = outboxrelay.NewMetrics(m.registry)
	m.schedule = schedule.NewMetrics(m.registry)
	return m
}

// ObserveRecovery records what the store replayed and found damaged at
// Open.
func (m *Metrics) ObserveRecovery(r store.Recovery) {
	m.recovered.WithLabelValues("wal_files").Set(float64(r.WALFiles))
	m.recovered.WithLabelValues("wal_batches").Set(float64(r.WALBatches))
	m.recovered.WithLabelValues("wal_keys").Set(float64(r.WALKeys))
	m.recovered.WithLabelValues("dedup_records").Set(float64(r.DedupRecords))
	m.damaged.Set(float64(len(r.Damaged)))
}

// ObserveCommit records one group commit of the store.
func (m *Metrics) ObserveCommit(ops, jobs int, d time.Duration) {
	m.commitTime.Observe(d.Seconds())
	if jobs > 0 {
		m.commitJobs.Observe(float64(jobs))
	}
}

// ObserveKeyReleased records that the store committed the deletion of n
// dedup records of queue because their jobs reached a final state their
// release_key_on names: sepp_dedup_outcomes_total{outcome="released"}.
func (m *Metrics) ObserveKeyReleased(queue string, n int) {
	m.dedupOutcomes.WithLabelValues(m.queues.exists(queue), "released").Add(float64(n)) // it held a job
}

// jobsByState reports sepp_jobs{queue,state} and sepp_dedup_records{queue}
// from the store at each scrape. ListQueues scans the jobs, which is fine at
// a scrape interval and keeps the hot paths free of counting.
type jobsByState struct{ s *Server }

var (
	jobsDesc  = prometheus.NewDesc("sepp_jobs", "Jobs by queue and state, read from the store at scrape time.", []string{"queue", "state"}, nil)
	dedupDesc = prometheus.NewDesc("sepp_dedup_records", "Live dedup records by queue, read from the store at scrape time.", []string{"queue"}, nil)
	heldDesc  = prometheus.NewDesc("sepp_jobs_held", "Jobs held back by queue and by what holds them (follow_up: a follow-up waiting for the job it follows to end; concurrency: its key at its [queues.concurrency] limit; rate: its key's [queues.rate] window full), read from the store at scrape time; they count in sepp_jobs as scheduled.", []string{"queue", "by"}, nil)
)

// scrapedHolds are the holds sepp_jobs_held reports, with their labels.
var scrapedHolds = [...]struct {
	hold  store.Hold
	label string
}{{store.HoldFollowUp, "follow_up"}, {store.HoldConcurrency, "concurrency"}, {store.HoldRate, "rate"}}

func (c jobsByState) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- dedupDesc
	ch <- heldDesc
}

func (c jobsByState) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stats, err := c.s.store.ListQueues(ctx, &store.ListQueuesParams{Now: c.s.now()})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
		return
	}
	// Queues without a label value of their own are added up under
	// "other".
	type counts struct {
		jobs  [len(scrapedStates)]int64
		held  [len(scrapedHolds)]int64
		dedup int64
	}
	byLabel := map[string]*counts{}
	var labels []string
	for _, q := range stats {
		label := c.s.metrics.queues.exists(q.Name)
		sum := byLabel[label]
		if sum == nil {
			sum = &counts{}
			byLabel[label] = sum
			labels = append(labels, label)
		}
		for i, st := range scrapedStates {
			sum.jobs[i] += q.Counts[st]
		}
		for i, h := range scrapedHolds {
			sum.held[i] += q.Held[h.hold]
		}
		sum.dedup += q.DedupRecords
	}
	for _, label := range labels {
		sum := byLabel[label]
		for i, st := range scrapedStates {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(sum.jobs[i]), label, st.String())
		}
		ch <- prometheus.MustNewConstMetric(dedupDesc, prometheus.GaugeValue, float64(sum.dedup), label)
		for i, h := range scrapedHolds {
			ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(sum.held[i]), label, h.label)
		}
	}
}

// scrapedStates are the states sepp_jobs reports.
var scrapedStates = [...]store.JobState{store.JobStateScheduled, store.JobStateAvailable, store.JobStateReserved,
	store.JobStateCompleted, store.JobStateDead, store.JobStateCancelled}

// observeSweep counts what one sweep call deleted and released.
func (m *Metrics) observeSweep(res store.SweepResult) {
	m.sweepDeleted.WithLabelValues("dedup_record").Add(float64(res.DedupRecords))
	m.sweepDeleted.WithLabelValues("job").Add(float64(res.Jobs))
	m.sweepDeleted.WithLabelValues("effect").Add(float64(res.Effects))
	m.leaseExpired.Add(float64(res.LeasesExpired))
	m.sweptAt.SetToCurrentTime()
}
