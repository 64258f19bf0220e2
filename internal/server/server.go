// Package server serves Sepp's API. One port answers gRPC (grpc-go's own
// HTTP/2 transport), and the Connect protocol and gRPC-Web over HTTP/1.1 and
// cleartext HTTP/2 (connect-go on net/http; the splitter hands an HTTP/2
// connection to grpc-go only when its first request is a gRPC call), with
// gRPC reflection, gRPC health and Prometheus /metrics.
// The same handler implementations serve both stacks; this package is the one
// place where errors become wire codes (errors.go).
package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
	"github.com/sepp-dev/sepp/internal/clock"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/outboxrelay"
	"github.com/sepp-dev/sepp/internal/schedule"
	"github.com/sepp-dev/sepp/internal/server/ui"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/sweep"
	"github.com/sepp-dev/sepp/internal/wakeup"
)

// Options configure New.
type Options struct {
	// Config is the loaded configuration. Required.
	Config *config.Config
	// Store is the storage backend. Required; the caller closes it after
	// Shutdown.
	Store store.Store
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
	// Metrics are served at /metrics. Default NewMetrics().
	Metrics *Metrics
	// Now is the server's clock, which judges windows, leases and run-ats.
	// Default time.Now; tests inject their own.
	Now func() time.Time
	// Local is the clock the server's waits run on: the long polls'
	// deadlines, the wake-ups at a run-at or a lease's end, the health
	// loop, the sweeper's interval and the age of the store probe /readyz
	// reuses. Default
	// clock.System; a test passes the clocktest.Fake its Now reads, so
	// that a waiting call ends only when the test moves that clock.
	Local clock.Local
	// TracerProvider, when set, receives the server's spans whatever
	// [tracing] says, and its owner shuts it down; tests pass one with an
	// in-memory exporter. Default nil: [tracing] decides (tracing.go).
	TracerProvider trace.TracerProvider
	// SweepBatch bounds the rows of each kind one Sweep call deletes, so
	// the sweeper never holds the store's writer for long; a sweep repeats
	// the call until the backlog is gone. Default 1000.
	SweepBatch int
	// Version is the server's version, which a backup's manifest names.
	// Default "dev".
	Version string
}

// Server is a Sepp API server. Create it with New, run it with Serve, stop it
// with Shutdown.
type Server struct {
	cfg     *config.Config
	store   store.Store
	log     *slog.Logger
	metrics *Metrics
	clock   func() time.Time
	local   clock.Local // see Options.Local
	tokens  []*token    // [[auth.tokens]] with their secrets read; none: auth off (auth.go)

	wake  *wakeup.Hub    // wakes waiting Reserve and ClaimEffect calls
	sweep *sweep.Sweeper // deletes what expired, releases expired leases
	polls longPolls      // waiting calls per connection and in all (limits.go)
	// requestLimits bound each request's size, by procedure (counts.go).
	requestLimits requestLimits

	grpc   *grpc.Server
	http   *http.Server
	health *health.Server
	// connectHealth answers the Connect health check; healthLoop keeps
	// both checks in step with the store.
	connectHealth *grpchealth.StaticChecker
	// tls serves [server] tls_cert_file and the rest (tls.go); nil
	// without TLS.
	tls *tlsReloader
	// storeState is the last probe of the store, which the health checks,
	// /healthz and /readyz share (probes.go).
	storeState storeHealth

	mu       sync.Mutex
	ln       net.Listener
	stopOnce sync.Once
	stop     chan struct{} // closed by Shutdown; stops the sweeper

	bg sync.WaitGroup

	// relays relay the [[outboxes]] tables into jobs (outbox.go).
	relays []*outboxrelay.Relay
	// schedules fire the [[schedules]] ticks (schedules.go).
	schedules []*schedule.Runner

	version string    // Options.Version
	backups backupSet // the copies CreateBackup made (backup.go)

	// tracer starts the server's spans; nil when tracing is off, which
	// every handler checks first (tracing.go). stopTracing flushes and
	// stops the exporter at Shutdown.
	tracer      trace.Tracer
	stopTracing func(context.Context) error
}

// The services every node declares; all four are registered so clients get
// Unimplemented rather than NotFound for methods a later release fills in.
var serviceNames = []string{
	seppv1connect.JobServiceName,
	seppv1connect.WorkerServiceName,
	seppv1connect.EffectServiceName,
	seppv1connect.AdminServiceName,
}

// New builds a server. It does not listen until Serve.
func New(opts Options) (*Server, error) {
	if opts.Config == nil || opts.Store == nil {
		return nil, errors.New("server: Options.Config and Options.Store are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Local == nil {
		opts.Local = clock.System
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{
		cfg:     opts.Config,
		store:   opts.Store,
		log:     opts.Logger,
		metrics: opts.Metrics,
		clock:   opts.Now,
		local:   opts.Local,
		stop:    make(chan struct{}),
		version: opts.Version,
	}
	if err := s.clearBackups(); err != nil { // backup.go
		return nil, err
	}
	if s.cfg.Server.TLS() {
		var err error
		if s.tls, err = newTLSReloader(s.cfg, s.log); err != nil {
			return nil, err
		}
	}
	tokens, err := loadTokens(s.cfg)
	if err != nil {
		return nil, err
	}
	s.tokens = tokens
	s.logAuth()
	if err := s.openRelays(); err != nil {
		return nil, err
	}
	if err := s.openSchedules(); err != nil { // schedules.go
		return nil, err
	}
	s.wake = wakeup.New(wakeup.Options{Now: s.now, Local: s.local, Recheck: safetyRecheck})
	s.sweep = sweep.New(sweep.Options{
		Store:              s.store,
		Now:                s.now,
		Interval:           s.cfg.Storage.SweepInterval(),
		Local:              s.local,
		Batch:              opts.SweepBatch,
		CompletedRetention: s.cfg.Storage.CompletedRetention(),
		DeadRetention:      s.cfg.Storage.DeadRetention(),
		Logger:             s.log,
		Observe:            s.metrics.observeSweep,
		// The released jobs are deliverable again, on queues the result
		// does not name.
		LeasesReleased: func() { s.wake.NotifyPrefix("") },
	})
	jobs := &jobService{s: s}
	workers := &workerService{s: s}
	admin := &adminService{s: s}
	effects := &effectService{s: s}

	// The bounds on lists, which the codecs check before decoding (counts.go).
	counts := &beforeDecode{s.cfg}
	s.requestLimits = newRequestLimits(s.cfg)
	s.grpc = grpc.NewServer(grpc.ChainUnaryInterceptor(s.grpcInterceptor), grpc.MaxRecvMsgSize(int(s.requestBytes())), // limits.go
		grpc.ForceServerCodecV2(newGRPCCodec(counts)), grpc.ChainStreamInterceptor(decodeErrorsStream), // decode.go

		grpc.Creds(splitCreds{}), // the splitter does the TLS handshake (tls.go)
		// Handshake, idle and ping timeouts of [limits] (connlimit.go).
		grpc.ConnectionTimeout(s.cfg.Limits.HeaderTimeout()), grpcKeepalive(s.cfg.Limits.ConnectionLimits), grpcEnforcement,
		grpc.MaxConcurrentStreams(uint32(s.cfg.Limits.StreamsPerConnection())),
		// Fixed flow-control windows, as large as a request may be: gRPC
		// then sends no bandwidth-probing PING and WINDOW_UPDATE with each
		// message, writes and wake-ups that cost a small call more than
		// its bytes do.
		grpc.InitialWindowSize(grpcStreamWindow), grpc.InitialConnWindowSize(grpcConnWindow))
	// Sepp's unary methods read their frames themselves (frames.go).
	framed := framedRegistrar{grpc: s.grpc, codec: newGRPCCodec(counts), limits: s.requestLimits, interceptor: s.grpcInterceptor}
	seppv1.RegisterJobServiceServer(framed, jobs)
	seppv1.RegisterWorkerServiceServer(framed, workers)
	seppv1.RegisterEffectServiceServer(framed, effects)
	seppv1.RegisterAdminServiceServer(framed, admin)
	s.health = health.NewServer()
	for _, name := range append([]string{""}, serviceNames...) {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)

	// One registry may serve several servers in tests; the first wins.
	_ = s.metrics.registry.Register(jobsByState{s})
	_ = s.metrics.registry.Register(longPollGauges{s})                  // limits.go
	s.metrics.queues.bound(s.cfg.Declared, s.cfg.Limits.MaxQueueLabels) // queuelabels.go

	interceptors := connect.WithHandlerOptions(
		connect.WithInterceptors(connect.UnaryInterceptorFunc(s.connectInterceptor)),
		connect.WithReadMaxBytes(int(s.requestBytes())),                                // limits.go
		connect.WithCodec(strictJSON{counts}), connect.WithCodec(connectProto{counts})) // codec.go, decode.go
	mux := http.NewServeMux()
	mux.Handle(seppv1connect.NewJobServiceHandler(jobs, interceptors))
	mux.Handle(seppv1connect.NewWorkerServiceHandler(workers, interceptors))
	mux.Handle(seppv1connect.NewEffectServiceHandler(effects, interceptors))
	mux.Handle(seppv1connect.NewAdminServiceHandler(admin, interceptors))
	s.connectHealth = grpchealth.NewStaticChecker(serviceNames...)
	mux.Handle(grpchealth.NewHandler(s.connectHealth))
	// metrics_token_role guards /metrics (auth.go).
	mux.Handle("/metrics", s.metricsAuth(promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})))
	// Liveness and readiness for load balancers and Kubernetes: no token,
	// but behind [limits] like every route (probes.go).
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("/readyz", s.readyz)
	if err := s.mountWebhooks(mux, jobs); err != nil { // [[webhooks]], webhook.go
		return nil, err
	}
	ui.Mount(mux) // the dashboard under /ui/ (dashboard/, built into internal/server/ui/dist)
	// The HTTP server takes HTTP/1.1 and the HTTP/2 connections whose first
	// request is not a gRPC call (PrefaceSplitter); a gRPC call on such a
	// connection goes to the gRPC server all the same.
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	limited := s.limitBody(s.checkFrames(mux)) // limits.go, frames.go
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		withTLSState(r) // over TLS, net/http sees the decrypted stream (tls.go)
		if r.ProtoMajor == 2 && isGRPCContentType(r.Header.Get("Content-Type")) {
			s.grpc.ServeHTTP(w, r)
			return
		}
		limited.ServeHTTP(w, r)
	})
	s.http = &http.Server{Handler: bodyDeadline(handler, s.cfg.Limits.BodyTimeout()), Protocols: protocols, // connlimit.go
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn), ConnContext: httpConnContext}
	setHTTPTimeouts(s.http, s.cfg.Limits.ConnectionLimits) // header, idle and ping timeouts: connlimit.go
	// Last, so that no failure above leaves its exporter running.
	if s.tracer, s.stopTracing, err = newTracing(s.cfg.Tracing, opts.TracerProvider, s.log); err != nil { // tracing.go
		return nil, err
	}
	return s, nil
}

// healthCheckEvery is how often the server probes its store for the health
// check.
const healthCheckEvery = 5 * time.Second

// The gRPC flow-control windows: a stream's is a large batch's size several
// times over, the connection's several streams'. Fixed windows turn off
// grpc-go's bandwidth estimation (grpc.InitialWindowSize).
const (
	grpcStreamWindow = 4 << 20
	grpcConnWindow   = 16 << 20
)

// healthLoop reports NOT_SERVING while the store cannot be read, so a load
// balancer takes a node that lost its database out of rotation. It stops at
// Shutdown. The rule and its state live in probes.go.
func (s *Server) healthLoop() {
	t := s.local.NewTimer(healthCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C():
		}
		_ = s.probeStore(healthCheckEvery)
		t.Reset(healthCheckEvery)
	}
}

// now is the server's clock at the store's resolution (microseconds), so the
// times a client sees are exactly the times stored.
func (s *Server) now() time.Time { return s.clock().UTC().Truncate(time.Microsecond) }

// WaitingReserves reports how many Reserve calls on queue wait: they looked,
// found no job to hand over, and sleep until a wake-up or their wait's end.
// A test waits for it to know a long poll is asleep.
func (s *Server) WaitingReserves(queue string) int { return s.wake.Waiting(queue) }

// WaitingEffectClaims is WaitingReserves for ClaimEffect calls that wait for
// the holder of (scope, key).
func (s *Server) WaitingEffectClaims(scope, key string) int {
	return s.wake.Waiting(effectWaitKey(scope, key))
}

// Serve accepts connections on ln and serves them until Shutdown. It also
// runs the sweeper. It returns nil after a Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.ln != nil {
		s.mu.Unlock()
		return errors.New("server: Serve called twice")
	}
	s.ln = ln
	s.mu.Unlock()

	s.runRelays()    // outbox.go
	s.runSchedules() // schedules.go
	split := NewPrefaceSplitter(ln, s.cfg.Limits.HeaderTimeout())
	split.limits = s.newConnLimiter() // limits.max_connections and _per_ip (connlimit.go)
	if s.tls != nil {
		split.SetTLS(s.tls.config(), func(remote net.Addr, err error) {
			s.log.Debug("TLS handshake failed", "remote", remote.String(), "err", err)
		})
	}
	if n, ok := store.As[store.Notifier](s.store); ok {
		// Other nodes' enqueues and effect completions wake this node's
		// waiting calls.
		lctx, cancel := context.WithCancel(context.Background())
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			<-s.stop
			cancel()
		}()
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			n.Listen(lctx, s.wake.Notify, s.effectDone)
		}()
	}
	s.bg.Add(3)
	go func() {
		defer s.bg.Done()
		split.Serve()
	}()
	go func() {
		defer s.bg.Done()
		s.sweep.Run(s.stop)
	}()
	go func() {
		defer s.bg.Done()
		s.healthLoop()
	}()
	errc := make(chan error, 2)
	go func() { errc <- s.grpc.Serve(split.HTTP2()) }()
	go func() { errc <- s.http.Serve(split.Other()) }()
	var first error
	for range 2 {
		err := <-errc
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) &&
			!errors.Is(err, net.ErrClosed) && first == nil {
			first = err
			s.ln.Close() // stop the other stack too
		}
	}
	return first
}

// Shutdown stops accepting connections, lets in-flight calls finish until ctx
// ends, and stops the sweeper. Every acknowledged write is already durable, so
// a shutdown cut short loses nothing that was acked.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.wake.Close() // answers the waiting calls now
	})
	// Nothing can fetch a copy once the server is gone (backup.go).
	if err := s.backups.close(); err != nil {
		s.log.Error("could not remove the backups at shutdown", "err", err)
	}
	s.health.Shutdown()
	s.connectNotServing() // probes.go
	s.mu.Lock()
	if s.ln != nil {
		s.ln.Close()
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	err := s.http.Shutdown(ctx)
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
		err = errors.Join(err, ctx.Err())
	}
	s.bg.Wait()
	// The calls are done: send the spans they left, within ctx.
	return errors.Join(err, s.stopTracing(ctx))
}

func (s *Server) grpcInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (res any, err error) {
	defer func() { // runs after recoverPanic
		if err == nil {
			return
		}
		if _, isStatus := err.(interface{ GRPCStatus() *status.Status }); !isStatus {
			err = grpcError(err)
		}
	}()
	defer s.recoverPanic(info.FullMethod, &err)
	if aerr := decodeError(req); aerr != nil { // decode.go
		return nil, aerr
	}
	return guard(s, ctx, info.FullMethod, grpcAuthorization(ctx), req, func(ctx context.Context) (any, error) { return handler(ctx, req) }) // auth.go
}

func (s *Server) connectInterceptor(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (res connect.AnyResponse, err error) {
		defer func() { // runs after recoverPanic
			var ce *connect.Error
			if err != nil && !errors.As(err, &ce) {
				err = connectError(err)
			}
		}()
		defer s.recoverPanic(req.Spec().Procedure, &err)
		ctx = withPeer(ctx, req.Peer().Addr)             // limits.go
		if aerr := decodeError(req.Any()); aerr != nil { // decode.go
			return nil, aerr
		}
		header := func() string { return req.Header().Get("Authorization") }
		return guard(s, ctx, req.Spec().Procedure, header, req.Any(), // auth.go
			func(ctx context.Context) (connect.AnyResponse, error) { return next(ctx, req) })
	}
}

// recoverPanic turns a handler panic into an Internal error and a log line
// with the stack, so one bad request cannot take the node down.
func (s *Server) recoverPanic(method string, err *error) {
	if r := recover(); r != nil {
		s.log.Error("handler panicked", "method", method, "panic", r, "stack", string(debug.Stack()))
		*err = newError(connect.CodeInternal, ReasonInternal, "internal error: the handler panicked (%v); this is a bug, please report it", r)
	}
}
