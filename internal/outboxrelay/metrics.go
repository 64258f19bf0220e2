package outboxrelay

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the relays' metrics, labelled by outbox name.
type Metrics struct {
	relayed *prometheus.CounterVec
	dead    *prometheus.CounterVec
	errors  *prometheus.CounterVec
	lag     *prometheus.GaugeVec
}

// NewMetrics makes the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_outbox_relayed_total",
			Help: "Outbox rows this node relayed into jobs (created, or a hit on the job an earlier pass created) and deleted.",
		}, []string{"outbox"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_outbox_dead_total",
			Help: "Outbox rows Sepp refused for good, moved to the outbox's dead table, by reason.",
		}, []string{"outbox", "reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sepp_outbox_errors_total",
			Help: "Relay passes that failed (the app database unreachable, a statement refused, Sepp unavailable); the rows stay and are relayed by a later pass.",
		}, []string{"outbox"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sepp_outbox_lag_seconds",
			Help: "Age of the oldest outbox row not yet relayed, by the app database's clock, as of the relay's last pass; 0 when the table is empty.",
		}, []string{"outbox"}),
	}
	reg.MustRegister(m.relayed, m.dead, m.errors, m.lag)
	return m
}
