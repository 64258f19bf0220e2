package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/sepp-dev/sepp/internal/config"
)

// Reasons a connection is refused, the reason label of
// sepp_connections_refused_total.
const (
	refusedTotal = "max_connections"
	refusedPerIP = "max_connections_per_ip"
)

// Pings on a quiet connection, on both stacks: after pingAfter without a
// frame from the client the server sends a PING, and closes the connection
// when no answer comes within pingTimeout, so a vanished client does not
// hold its connection until the idle timeout (or, with a call in progress,
// forever).
const (
	pingAfter   = time.Minute
	pingTimeout = 20 * time.Second
	// minClientPing is the shortest interval between a client's keepalive
	// pings that grpc-go tolerates; a client that pings more often is sent
	// GOAWAY (ENHANCE_YOUR_CALM). The Go client sends none (client.go sets
	// no keepalive); other gRPC clients commonly ping every 10 s or more.
	minClientPing = 5 * time.Second
)

// fdReserve is how many of the process's file descriptors are kept for
// other uses than client connections (the store's files, PostgreSQL
// connections, outgoing connections, log files): an eighth of the limit, at
// least 128.
func fdReserve(limit uint64) uint64 { return max(128, limit/8) }

// connCap lowers want to what RLIMIT_NOFILE leaves room for. It returns the
// cap and the soft limit (0 when it cannot be read).
func connCap(want int, extra int) (int, uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 || rl.Cur > 1<<40 {
		return want, 0
	}
	room := int64(rl.Cur) - int64(fdReserve(rl.Cur)) - int64(extra)
	if room < 1 {
		room = 1
	}
	return int(min(int64(want), room)), rl.Cur
}

// connLimiter enforces limits.max_connections and
// limits.max_connections_per_ip on the splitter's accept path: it counts
// the open connections in all and per client IP address, and closes a new
// connection over either limit before anything is read from it. The client
// sees the connection closed; the reason is in the log (at most one line per
// reason per logEvery) and in sepp_connections_refused_total{reason}.
type connLimiter struct {
	max, perIP int
	log        *slog.Logger
	open       prometheus.Gauge
	refused    *prometheus.CounterVec

	mu     sync.Mutex
	total  int
	byIP   map[netip.Addr]int
	logged map[string]time.Time // reason -> last log line
	quiet  map[string]int       // reason -> refusals since that line
}

// logEvery bounds the log lines about refused connections: one per reason
// per interval, with the count of the refusals it stands for.
const logEvery = 10 * time.Second

// connMetrics returns the connection metrics registered in m, registering
// them on first use (servers that share a registry share them).
func connMetrics(m *Metrics) (prometheus.Gauge, *prometheus.CounterVec) {
	var open prometheus.Gauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sepp_connections_open",
		Help: "Client connections open on the API port (accepted and not yet closed).",
	})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sepp_connections_refused_total",
		Help: "Client connections closed as soon as they were accepted, by the limit they were over: max_connections or max_connections_per_ip.",
	}, []string{"reason"})
	var are prometheus.AlreadyRegisteredError
	if err := m.registry.Register(open); errors.As(err, &are) {
		open = are.ExistingCollector.(prometheus.Gauge)
	}
	if err := m.registry.Register(refused); errors.As(err, &are) {
		refused = are.ExistingCollector.(*prometheus.CounterVec)
	}
	refused.WithLabelValues(refusedTotal)
	refused.WithLabelValues(refusedPerIP)
	return open, refused
}

// newConnLimiter builds the limiter of s's [limits], capped by the open-file
// limit.
func (s *Server) newConnLimiter() (lim *connLimiter) {
	l := s.cfg.Limits.ConnectionLimits
	extra := 0
	if s.cfg.Storage.Backend == config.BackendPostgres {
		extra = s.cfg.Storage.PoolSize + 1
	}
	want := l.Connections()
	capped, nofile := connCap(want, extra)
	if capped < want {
		s.log.Warn("limits.max_connections lowered to what the open-file limit leaves room for; raise the limit (ulimit -n, LimitNOFILE=) to allow more",
			"max_connections", want, "lowered_to", capped, "open_file_limit", nofile)
	}
	defer func() {
		s.log.Info("connection limits", "max_connections", lim.max, "max_connections_per_ip", lim.perIP,
			"idle_timeout", l.IdleTimeout(), "header_timeout", l.HeaderTimeout(), "body_timeout", l.BodyTimeout())
	}()
	perIP := min(l.ConnectionsPerIP(), capped)
	if l.MaxConnectionsPerIP == 0 && capped < 2*perIP {
		// Left at its default, the per-address limit keeps half of a
		// lowered max_connections for other addresses, so one client
		// cannot take every connection.
		perIP = max(capped/2, 1)
	}
	open, refused := connMetrics(s.metrics)
	lim = &connLimiter{
		max: capped, perIP: perIP, log: s.log, open: open, refused: refused,
		byIP: map[netip.Addr]int{}, logged: map[string]time.Time{}, quiet: map[string]int{},
	}
	return lim
}

// ipOf is the client IP address of c (IPv4 in IPv6 unmapped), or the zero
// Addr when c's address is not TCP.
func ipOf(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// admit counts c and returns it wrapped so that closing it uncounts it, or
// closes c and returns nil when it is over a limit.
func (l *connLimiter) admit(c net.Conn) net.Conn {
	ip := ipOf(c)
	l.mu.Lock()
	reason := ""
	switch {
	case l.total >= l.max:
		reason = refusedTotal
	case l.byIP[ip] >= l.perIP:
		reason = refusedPerIP
	default:
		l.total++
		l.byIP[ip]++
	}
	var logNow bool
	var n int
	if reason != "" {
		l.quiet[reason]++
		if now := time.Now(); now.Sub(l.logged[reason]) >= logEvery {
			logNow, n = true, l.quiet[reason]
			l.logged[reason], l.quiet[reason] = now, 0
		}
	}
	l.mu.Unlock()
	if reason == "" {
		l.open.Inc()
		return &trackedConn{Conn: c, l: l, ip: ip}
	}
	c.Close()
	l.refused.WithLabelValues(reason).Inc()
	if logNow {
		limit, what := l.max, "limits.max_connections"
		if reason == refusedPerIP {
			limit, what = l.perIP, "limits.max_connections_per_ip"
		}
		l.log.Warn("connection refused: over "+what+"; it was closed at once (this line stands for every refusal for this reason since the last one)",
			"reason", reason, "limit", limit, "remote", c.RemoteAddr().String(), "refused", n)
	}
	return nil
}

func (l *connLimiter) release(ip netip.Addr) {
	l.mu.Lock()
	l.total--
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
	l.mu.Unlock()
	l.open.Dec()
}

// trackedConn is an admitted connection; its first Close uncounts it.
type trackedConn struct {
	net.Conn
	l    *connLimiter
	ip   netip.Addr
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}

// CloseWrite half-closes the connection when the underlying one supports it.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// admit applies the splitter's connection limits to c (see connLimiter):
// the connection to dispatch, or nil when c was refused and closed.
func (s *PrefaceSplitter) admit(c net.Conn) net.Conn {
	if s.limits == nil {
		return c
	}
	return s.limits.admit(c)
}

// grpcKeepalive is grpc-go's keepalive for its own transport: a
// connection with no call in progress for the idle timeout is closed
// (GOAWAY, then closed once the client acknowledges or after 5 s), and a
// quiet one is pinged. With grpc.ConnectionTimeout(header timeout), which
// bounds the HTTP/2 handshake (the client's SETTINGS), a connection that
// sent the HTTP/2 preface and then nothing, which the splitter hands to
// grpc-go after the header timeout, is closed after twice that.
func grpcKeepalive(l config.ConnectionLimits) grpc.ServerOption {
	return grpc.KeepaliveParams(keepalive.ServerParameters{
		MaxConnectionIdle: l.IdleTimeout(),
		Time:              pingAfter,
		Timeout:           pingTimeout,
	})
}

// grpcEnforcement tolerates clients that ping every minClientPing, with or
// without a call in progress (grpc-go's default refuses pings more often
// than every 5 minutes, and any without a call).
var grpcEnforcement = grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
	MinTime:             minClientPing,
	PermitWithoutStream: true,
})

// setHTTPTimeouts sets the net/http server's timeouts from [limits]:
// headers within the header timeout, keep-alive and HTTP/2 connections
// closed after the idle timeout, quiet HTTP/2 connections pinged. It sets
// no WriteTimeout, which would cut every response longer than it, and so
// every long poll (Reserve or ClaimEffect with wait_ms up to 5 min) that
// waits past it. It sets no ReadTimeout either: measured with Go 1.26, a
// ReadTimeout does not hurt a long poll (net/http lifts the connection's
// read deadline once the body is read, on HTTP/1.1, and HTTP/2 applies it
// to the stream's body only), but bodyDeadline gives the same bound to the
// body alone, counted from the end of the headers, and is lifted explicitly
// at the body's end rather than by net/http's internals.
func setHTTPTimeouts(hs *http.Server, l config.ConnectionLimits) {
	hs.ReadHeaderTimeout = l.HeaderTimeout()
	hs.IdleTimeout = l.IdleTimeout()
	if hs.HTTP2 == nil {
		hs.HTTP2 = &http.HTTP2Config{}
	}
	hs.HTTP2.SendPingTimeout = pingAfter
	hs.HTTP2.PingTimeout = pingTimeout
	hs.HTTP2.MaxConcurrentStreams = l.StreamsPerConnection()
}

// bodyDeadline gives every request with a body limits.body_timeout_ms for
// the body to arrive, from when the handler starts: a read after that fails
// (and an HTTP/1.1 connection is then closed). The deadline is lifted as
// soon as the body has been read to its end, so it never bounds the
// response: a long poll waits as long as it asked to. gRPC calls that reach
// net/http are left alone, as on grpc-go's own transport, where flow control
// and the client's deadline bound them.
func bodyDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d <= 0 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 ||
			(r.ProtoMajor == 2 && isGRPCContentType(r.Header.Get("Content-Type"))) {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			next.ServeHTTP(w, r) // the writer does not support deadlines
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, w: w, http1: r.ProtoMajor == 1}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline once the body reaches its end. On
// HTTP/1.1, a read that fails otherwise (the deadline passed) makes the
// answer close the connection: net/http would keep it, and read the rest of
// the slow body as the next request's headers, holding the connection for
// another header timeout.
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	w      http.ResponseWriter
	http1  bool
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil || b.lifted:
	case errors.Is(err, io.EOF):
		b.lifted = true
		b.rc.SetReadDeadline(time.Time{})
	case b.http1:
		b.w.Header().Set("Connection", "close")
	}
	return n, err
}
