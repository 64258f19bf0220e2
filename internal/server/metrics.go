package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the server's Prometheus metrics, served at /metrics. Create
// them before the store so the store can report its commits (ObserveCommit).
type Metrics struct {
	registry     *prometheus.Registry
	enqueues     *prometheus.CounterVec
	dedupHits    *prometheus.CounterVec
	commitTime   prometheus.Histogram
	commitJobs   prometheus.Histogram
	sweepDeleted *prometheus.CounterVec
}

// NewMetrics creates the metrics in a registry of their own, with the Go
// runtime and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		enqueues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_enqueues_total",
			Help: "Enqueued jobs by queue and outcome (created, deduplicated, rejected).",
		}, []string{"queue", "outcome"}),
		dedupHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_dedup_hits_total",
			Help: "Enqueues answered with an existing job because their idempotency key was recorded.",
		}, []string{"queue"}),
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
			Help: "Rows deleted by the sweeper: expired dedup records and jobs past retention.",
		}, []string{"kind"}),
	}
	m.registry.MustRegister(m.enqueues, m.dedupHits, m.commitTime, m.commitJobs, m.sweepDeleted,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveCommit records one group commit of the store.
func (m *Metrics) ObserveCommit(ops, jobs int, d time.Duration) {
	m.commitTime.Observe(d.Seconds())
	if jobs > 0 {
		m.commitJobs.Observe(float64(jobs))
	}
}
