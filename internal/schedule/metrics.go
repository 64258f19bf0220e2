package schedule

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the schedules' metrics, labelled by schedule name.
type Metrics struct {
	ticks  *prometheus.CounterVec
	errors *prometheus.CounterVec
}

// Outcomes of a tick, the values of the outcome label.
const (
	outcomeCreated   = "created"
	outcomeDuplicate = "duplicate"
	outcomeSkipped   = "skipped"
)

// NewMetrics makes the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ticks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_schedule_ticks_total",
			Help: "Ticks of [[schedules]] this node dealt with, by outcome: created (this node's enqueue made the tick's job), duplicate (the job already existed, made by another node or an earlier attempt), skipped (passed over under catch_up).",
		}, []string{"schedule", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_schedule_errors_total",
			Help: "Failed attempts of this node to read the schedule's state, enqueue a tick's job or record the tick; the tick is retried, never skipped.",
		}, []string{"schedule"}),
	}
	reg.MustRegister(m.ticks, m.errors)
	return m
}

// init makes a schedule's series exist at zero from the start, so rates
// and alerts see them before the first tick.
func (m *Metrics) init(name string) {
	for _, o := range []string{outcomeCreated, outcomeDuplicate, outcomeSkipped} {
		m.ticks.WithLabelValues(name, o)
	}
	m.errors.WithLabelValues(name)
}
