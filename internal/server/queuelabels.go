package server

// Metric series carry a queue label only for a queue that is declared in
// [[queues]] or exists, so that calls naming made-up queues (refused with
// UNKNOWN_QUEUE, INVALID_FIELD, ...) cannot add series without end. A queue
// exists once the store has held a job of it: this node stored or
// deduplicated an enqueue on it, a scrape of sepp_jobs listed it, or the
// store released one of its keys. Every other name is counted under the
// label value "other".
const otherQueueLabel = "other"

// knowQueue records that queue exists.
func (m *Metrics) knowQueue(queue string) { m.knownQueues.Store(queue, struct{}{}) }

// queueLabel is the queue label value for queue: queue itself if it is
// declared or exists, else "other".
func (s *Server) queueLabel(queue string) string {
	if s.cfg.Declared(queue) {
		return queue
	}
	if _, ok := s.metrics.knownQueues.Load(queue); ok {
		return queue
	}
	return otherQueueLabel
}
