package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/peer"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// The [limits] table (config.LimitsConfig) in force: what one request or one
// connection may ask of the node. Each bound is refused with LIMIT_EXCEEDED
// (ResourceExhausted), naming its key (docs/security.md, Limits on requests).

// limitExceeded is the error of a call over the [limits] key key (named
// without its table) whose value is limit. Its metadata has limit (the full
// key, "limits.max_reserve_queues") and value.
func limitExceeded(key string, limit int64, format string, args ...any) *apiError {
	e := newError(connect.CodeResourceExhausted, ReasonLimitExceeded, format, args...)
	e.metadata = map[string]string{"limit": "limits." + key, "value": strconv.FormatInt(limit, 10)}
	return e
}

// longPolls counts the waiting calls (Reserve and ClaimEffect with
// wait_ms > 0) of each connection, of each client and of the node.
type longPolls struct {
	mu       sync.Mutex
	total    int
	byConn   map[string]int
	byClient map[string]int
}

// peerKey is the context key of the client connection's address, set by the
// Connect interceptor (grpc-go calls carry a peer.Peer instead).
type peerKey struct{}

// connOf names the connection a call came on: its remote address and port,
// unique among the node's open connections.
func connOf(ctx context.Context) string {
	if a, ok := ctx.Value(peerKey{}).(string); ok && a != "" {
		return a
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// clientOf names the client a call belongs to, for
// limits.max_long_polls_per_client: its token when [auth] has tokens (a
// token's calls are one client wherever they come from), else its
// connection's IP address, so that the connections of one address share
// one bound.
func clientOf(ctx context.Context) string {
	if t := principal(ctx); t != nil {
		return fmt.Sprintf("token %q", t.Name)
	}
	conn := connOf(ctx)
	if ap, err := netip.ParseAddrPort(conn); err == nil {
		return "address " + ap.Addr().Unmap().String()
	}
	return "address " + conn
}

// withPeer records a Connect call's remote address for connOf.
func withPeer(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, peerKey{}, addr)
}

// startLongPoll admits one waiting call of ctx's connection, or refuses it
// over limits.max_long_polls, limits.max_long_polls_per_client or
// limits.max_long_polls_per_connection. The caller calls done when the call
// ends.
func (s *Server) startLongPoll(ctx context.Context) (done func(), aerr *apiError) {
	l := s.cfg.Limits
	conn, client := connOf(ctx), clientOf(ctx)
	perClient := l.LongPollsPerClient()
	p := &s.polls
	p.mu.Lock()
	defer p.mu.Unlock()
	refuse := func(limit string, value int, format string, args ...any) (func(), *apiError) {
		s.metrics.longPollsRefused.WithLabelValues(limit).Inc()
		return nil, limitExceeded(limit, int64(value), format, args...)
	}
	if p.total >= l.MaxLongPolls {
		return refuse("max_long_polls", l.MaxLongPolls,
			"the node already holds %d waiting calls, its limit (limits.max_long_polls = %d): retry later, or with wait_ms = 0", p.total, l.MaxLongPolls)
	}
	if n := p.byClient[client]; n >= perClient {
		return refuse("max_long_polls_per_client", perClient,
			"this client (%s) already has %d waiting calls over all its connections, its limit (limits.max_long_polls_per_client = %d): wait for one to return before starting another, or send with wait_ms = 0; more workers than that behind one address or on one token need the limit raised on the server",
			client, n, perClient)
	}
	if n := p.byConn[conn]; n >= l.MaxLongPollsPerConnection {
		return refuse("max_long_polls_per_connection", l.MaxLongPollsPerConnection,
			"this connection already has %d waiting calls, its limit (limits.max_long_polls_per_connection = %d): wait for one to return before starting another, or send with wait_ms = 0", n, l.MaxLongPollsPerConnection)
	}
	if p.byConn == nil {
		p.byConn, p.byClient = map[string]int{}, map[string]int{}
	}
	p.total++
	p.byConn[conn]++
	p.byClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.total--
			if p.byConn[conn]--; p.byConn[conn] <= 0 {
				delete(p.byConn, conn)
			}
			if p.byClient[client]--; p.byClient[client] <= 0 {
				delete(p.byClient, client)
			}
		})
	}, nil
}

// longPollLimits are the label values of sepp_long_polls_refused_total.
var longPollLimits = []string{"max_long_polls", "max_long_polls_per_client", "max_long_polls_per_connection"}

// longPollGauges reports sepp_long_polls_waiting and sepp_long_polls_limit
// at each scrape, so that an alert can see the node's waiting calls near
// limits.max_long_polls before calls are refused.
type longPollGauges struct{ s *Server }

var (
	longPollsWaitingDesc = prometheus.NewDesc("sepp_long_polls_waiting", "Waiting calls (Reserve, ClaimEffect with wait_ms > 0) the node holds now.", nil, nil)
	longPollsLimitDesc   = prometheus.NewDesc("sepp_long_polls_limit", "The node's limit on waiting calls, limits.max_long_polls.", nil, nil)
)

func (g longPollGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- longPollsWaitingDesc
	ch <- longPollsLimitDesc
}

func (g longPollGauges) Collect(ch chan<- prometheus.Metric) {
	p := &g.s.polls
	p.mu.Lock()
	n := p.total
	p.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(longPollsWaitingDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(longPollsLimitDesc, prometheus.GaugeValue, float64(g.s.cfg.Limits.MaxLongPolls))
}

// checkReserveLimits applies limits.max_reserve_queues (counts.go) and
// limits.max_reserve_jobs to a Reserve, before it looks at any queue.
func (s *Server) checkReserveLimits(req *seppv1.ReserveRequest) *apiError {
	if aerr := checkCount(s.cfg, req); aerr != nil {
		return aerr
	}
	l := s.cfg.Limits
	if maxJobs := req.GetMaxJobs(); int64(maxJobs) > int64(l.MaxReserveJobs) {
		return limitExceeded("max_reserve_jobs", int64(l.MaxReserveJobs),
			"max_jobs is %d; the limit is %d (limits.max_reserve_jobs): ask for fewer jobs per Reserve", maxJobs, l.MaxReserveJobs)
	}
	return nil
}

// waitMs reads the wait_ms of a Reserve or ClaimEffect: 0 to max, checked
// before it becomes a duration, so a huge value cannot wrap around.
// longPoll checks a call's wait_ms (up to max) and, when it waits, takes a
// long-poll place (startLongPoll); done gives the place back.
func (s *Server) longPoll(ctx context.Context, ms int64, max time.Duration) (wait time.Duration, done func(), aerr *apiError) {
	if wait, aerr = waitMs(ms, max); aerr != nil {
		return 0, nil, aerr
	}
	if wait == 0 {
		return 0, func() {}, nil
	}
	if done, aerr = s.startLongPoll(ctx); aerr != nil {
		return 0, nil, aerr
	}
	return wait, done, nil
}

func waitMs(ms int64, max time.Duration) (time.Duration, *apiError) {
	if ms < 0 || ms > max.Milliseconds() {
		return 0, invalidField("wait_ms", "must be between 0 and %d, got %d", max.Milliseconds(), ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// requestBytes is the largest request message the transports read.
func (s *Server) requestBytes() int64 { return s.cfg.Limits.RequestBytes(s.cfg.Server) }

// How long, and how much, of a refused body the server reads and drops so
// that the client gets the answer before the connection closes.
const (
	refusedBodyDrain      = time.Second
	refusedBodyDrainBytes = 256 << 20
)

// answerUnread answers r with answer, which writes a refusal, without
// reading the rest of its body. Over HTTP/2 the stream is reset after the
// answer (RST_STREAM NO_ERROR, RFC 9113 section 8.1), which tells the
// client to stop sending: nothing more is read, and the connection's other
// calls go on. Over HTTP/1.1 the connection is closed after the answer;
// closing it with unread bytes would reset it, and the client could lose
// the answer, so the answer goes out first, and the body is read and
// dropped for a moment (never kept) while the client reads it.
func answerUnread(w http.ResponseWriter, r *http.Request, answer func()) {
	if r.ProtoMajor >= 2 {
		answer()
		return
	}
	rc := http.NewResponseController(w)
	// Read the body after answering: net/http would read up to 256 KB of
	// it before writing the answer.
	_ = rc.EnableFullDuplex()
	w.Header().Set("Connection", "close")
	answer()
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(refusedBodyDrain))
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, refusedBodyDrainBytes))
}

// limitBody refuses an HTTP request whose Content-Length is over its
// procedure's request limit (requestLimits) before reading any of it, and
// caps the body of any other request, so an oversized body is never
// buffered. The refusal is a Connect error in the request's protocol
// (Connect, gRPC-Web or gRPC). A gRPC-Web body without a length is left to
// checkFrames, which refuses it from its message's length prefix.
func (s *Server) limitBody(next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		limit := s.requestLimits.of(r.URL.Path, jsonContentType(ct))
		refuse := func(size string) {
			aerr := limit.refuse("body", size)
			answerUnread(w, r, func() {
				// The API's paths get a Connect error, the others
				// (webhooks, /metrics) a 413.
				if api := strings.HasPrefix(r.URL.Path, "/sepp.") || strings.HasPrefix(r.URL.Path, "/grpc."); api && ew.IsSupported(r) {
					_ = ew.Write(w, r, connectError(aerr))
				} else {
					http.Error(w, aerr.msg, http.StatusRequestEntityTooLarge)
				}
			})
		}
		// Framing (the 5-byte envelopes of gRPC-Web and the Connect
		// streaming protocol, their end-of-stream message) comes on top of
		// one message.
		max := limit.max + 1024
		hasBody := r.Body != nil && r.Body != http.NoBody
		switch {
		case r.ContentLength > max:
			refuse(strconv.FormatInt(r.ContentLength, 10))
			return
		case r.ContentLength < 0 && hasBody && !(guarded(r.URL.Path) && framedContentType(ct)):
			// No length given: read at most the limit, as the codec would
			// have, and refuse the body if there is more.
			body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
			if err != nil {
				http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
				return
			}
			if int64(len(body)) > max {
				refuse("more than " + strconv.FormatInt(max, 10))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		case hasBody:
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		next.ServeHTTP(w, r)
	})
}
