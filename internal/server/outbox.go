package server

import (
	"context"
	"fmt"
	"os"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/outboxrelay"
	"github.com/sepp-dev/sepp/internal/outboxsql"
)

// CheckOutboxURLs reads each [[outboxes]] connection string as serve does,
// for --check-config.
func CheckOutboxURLs(cfg *config.Config) error {
	for _, oc := range cfg.ResolvedOutboxes() {
		if _, err := readOutboxURL(oc); err != nil {
			return err
		}
	}
	return nil
}

// readOutboxURL reads an outbox's connection string from where url_env or
// url_file says.
func readOutboxURL(oc config.OutboxConfig) (string, error) {
	if oc.URLEnv != "" {
		v := strings.TrimSpace(os.Getenv(oc.URLEnv))
		if v == "" {
			return "", fmt.Errorf("outbox %q: the environment variable %s, which url_env names, is not set or empty: set it to the app database's connection string", oc.Name, oc.URLEnv)
		}
		return v, nil
	}
	b, err := os.ReadFile(oc.URLFile)
	if err != nil {
		return "", fmt.Errorf("outbox %q: url_file: %w", oc.Name, err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("outbox %q: url_file %s is empty: write the app database's connection string into it", oc.Name, oc.URLFile)
	}
	return v, nil
}

// openRelays opens a relay per [[outboxes]] entry; Serve runs them.
func (s *Server) openRelays() error {
	for _, oc := range s.cfg.ResolvedOutboxes() {
		conn, err := readOutboxURL(oc)
		if err != nil {
			return err
		}
		d, err := outboxsql.ParseDialect(oc.Dialect)
		if err != nil {
			return fmt.Errorf("outbox %q: %w", oc.Name, err)
		}
		r, err := outboxrelay.Open(outboxrelay.Config{Name: oc.Name, Dialect: d, URL: conn, Table: oc.Table,
			BatchSize: oc.BatchSize, PollInterval: oc.PollInterval()}, relayEnqueuer{s}, s.metrics.outbox, s.log)
		if err != nil {
			return err
		}
		s.relays = append(s.relays, r)
	}
	return nil
}

// runRelays runs the relays until Shutdown.
func (s *Server) runRelays() {
	loops := make([]func(context.Context), len(s.relays))
	for i, r := range s.relays {
		loops[i] = r.Run
		s.log.Info("relaying outbox", "outbox", r.Info().Name, "dialect", r.Info().Dialect, "table", r.Info().Table)
	}
	s.runLoops(loops)
}

// runLoops runs each loop on a goroutine of its own, with a context that
// Shutdown cancels, and Shutdown waits for them (s.bg).
func (s *Server) runLoops(loops []func(context.Context)) {
	if len(loops) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		<-s.stop
		cancel()
	}()
	for _, run := range loops {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			run(ctx)
		}()
	}
}

// relayEnqueuer is the server as the relays' Enqueuer: the enqueue a
// client's EnqueueBatch gets, with the same checks, policies and metrics.
type relayEnqueuer struct{ s *Server }

func (e relayEnqueuer) EnqueueBatch(ctx context.Context, req *seppv1.EnqueueBatchRequest) (*seppv1.EnqueueBatchResponse, error) {
	return (&jobService{s: e.s}).EnqueueBatch(ctx, req)
}

func (e relayEnqueuer) DerivesKey(queue string) bool {
	qc := e.s.cfg.Queue(queue)
	return len(qc.KeyFields) > 0 || qc.DedupByContent
}

func (a *adminService) ListOutboxes(ctx context.Context, _ *seppv1.ListOutboxesRequest) (*seppv1.ListOutboxesResponse, error) {
	res := &seppv1.ListOutboxesResponse{}
	for _, r := range a.s.relays {
		in := r.Info()
		o := &seppv1.OutboxInfo{Name: in.Name, Dialect: in.Dialect, Table: in.Table, LagMs: in.Lag.Milliseconds(),
			Relayed: in.Relayed, Dead: in.Dead, LastError: in.LastError}
		if !in.CheckedAt.IsZero() {
			o.CheckedAt = timestamppb.New(in.CheckedAt)
		}
		res.Outboxes = append(res.Outboxes, o)
	}
	return res, nil
}
