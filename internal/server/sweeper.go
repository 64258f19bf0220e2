package server

import (
	"context"

	"github.com/sepp-dev/sepp/internal/store"
)

// Sweep runs one sweep now (package sweep): it deletes every expired dedup
// record, every job past its retention and every completed effect past its
// TTL, and releases expired leases. It returns the totals.
func (s *Server) Sweep(ctx context.Context) (store.SweepResult, error) {
	return s.sweep.Sweep(ctx)
}
