package server

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// http2Preface is the client connection preface every HTTP/2 connection
// starts with (RFC 9113, section 3.4). Over cleartext TCP a client that sends
// it speaks HTTP/2 with prior knowledge, which is what gRPC clients do.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// PrefaceSplitter splits one net.Listener in two by sniffing the first bytes
// of every accepted connection: HTTP/2 connections whose first request is a
// gRPC call are handed to [PrefaceSplitter.HTTP2], every other connection
// (HTTP/1.x, and HTTP/2 connections whose first request is anything else:
// Connect, gRPC-Web, a webhook, /metrics) to [PrefaceSplitter.Other], whose
// server must therefore speak HTTP/2 with prior knowledge too.
//
// To see an HTTP/2 connection's first request the splitter sends the
// server's connection preface (an empty SETTINGS frame) itself, since gRPC
// clients wait for it before they send a request, and reads the client's
// frames up to its first HEADERS. The client's acknowledgement of that
// SETTINGS frame is dropped, so the server behind the child listener sees
// an ordinary connection; the server's own SETTINGS frame, sent once it
// starts, is a second SETTINGS frame, which HTTP/2 allows at any time. An
// HTTP/2 connection that sends a PING, or no request within the sniff
// timeout, is an idle gRPC channel in practice and goes to HTTP2.
//
// The sniffed bytes are not lost: the connection handed on replays them
// before reading from the socket again, so the server behind each child
// listener sees the stream from its first byte.
//
// The sniff runs in its own goroutine per connection, so a slow client never
// holds up Accept. A connection that neither completes the preface nor
// diverges from it within the sniff timeout is closed.
//
// Use:
//
//	sp := NewPrefaceSplitter(ln, 5*time.Second)
//	go grpcServer.Serve(sp.HTTP2())
//	go httpServer.Serve(sp.Other())
//	err := sp.Serve() // returns when ln is closed (sp.Close)
type PrefaceSplitter struct {
	root    net.Listener
	timeout time.Duration
	h2      *childListener
	other   *childListener

	tlsConfig    *tls.Config           // nil: cleartext; see SetTLS
	handshakeErr func(net.Addr, error) // see SetTLS

	limits *connLimiter // nil: no connection limits (connlimit.go)
}

// SetTLS makes the splitter serve TLS: every accepted connection does its
// TLS handshake with cfg first (in its own goroutine, within the sniff
// timeout), and the decrypted stream is then split as a cleartext one is
// (HTTP/2, negotiated with ALPN "h2", judged by its first request; HTTP/1.1
// to Other). onErr, if not nil, is told of each failed handshake. Call it
// before Serve.
func (s *PrefaceSplitter) SetTLS(cfg *tls.Config, onErr func(remote net.Addr, err error)) {
	s.tlsConfig, s.handshakeErr = cfg, onErr
}

// NewPrefaceSplitter returns a splitter reading from root. timeout bounds how
// long a new connection may take to send enough bytes to be classified; zero
// or less means 10s.
func NewPrefaceSplitter(root net.Listener, timeout time.Duration) *PrefaceSplitter {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &PrefaceSplitter{
		root:    root,
		timeout: timeout,
		h2:      newChildListener(root.Addr()),
		other:   newChildListener(root.Addr()),
	}
}

// HTTP2 returns the listener that yields connections which sent the HTTP/2
// client preface.
func (s *PrefaceSplitter) HTTP2() net.Listener { return s.h2 }

// Other returns the listener that yields every other connection.
func (s *PrefaceSplitter) Other() net.Listener { return s.other }

// Addr returns the address of the underlying listener.
func (s *PrefaceSplitter) Addr() net.Addr { return s.root.Addr() }

// Close closes the underlying listener and both child listeners. Connections
// already handed on are not affected.
func (s *PrefaceSplitter) Close() error {
	err := s.root.Close()
	s.h2.Close()
	s.other.Close()
	return err
}

// Serve accepts connections from the underlying listener and dispatches them
// until that listener fails. It returns nil once the listener is closed,
// and closes both child listeners on the way out so servers blocked in
// Accept return.
func (s *PrefaceSplitter) Serve() error {
	defer s.h2.Close()
	defer s.other.Close()
	var backoff time.Duration
	for {
		c, err := s.root.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Anything else (e.g. EMFILE) is treated as transient, the way
			// net/http does: back off and retry.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if c = s.admit(c); c == nil {
			continue // over a connection limit, and closed (connlimit.go)
		}
		go s.dispatch(c)
	}
}

// dispatch sniffs c and hands it to the matching child listener.
func (s *PrefaceSplitter) dispatch(c net.Conn) {
	if s.tlsConfig != nil {
		tc, err := handshake(c, s.tlsConfig, s.timeout)
		if err != nil {
			if s.handshakeErr != nil {
				s.handshakeErr(c.RemoteAddr(), err)
			}
			c.Close()
			return
		}
		c = tc
	}
	prefix, isH2, err := sniff(c, s.timeout)
	if err != nil {
		c.Close()
		return
	}
	if !isH2 {
		s.other.deliver(&replayConn{Conn: c, prefix: prefix})
		return
	}
	frames, grpc, acked, err := firstRequest(c, s.timeout)
	if err != nil {
		c.Close()
		return
	}
	wc := &replayConn{Conn: c, prefix: append(prefix, frames...)}
	if grpc {
		s.h2.deliver(wc)
		return
	}
	if acked {
		s.other.deliver(wc)
		return
	}
	// The preface is not a frame: it goes first, then frames are parsed.
	s.other.deliver(&ackDropConn{replayConn: &replayConn{Conn: c, prefix: frames}, pending: prefix})
}

// settingsFrame is an empty SETTINGS frame: the server's connection preface
// with every setting at its default (RFC 9113, sections 3.4 and 6.5).
var settingsFrame = []byte{0, 0, 0, byte(http2.FrameSettings), 0, 0, 0, 0, 0}

// maxSniffFrames bounds the bytes the splitter reads from an HTTP/2
// connection while it waits for the first request.
const maxSniffFrames = 64 << 10

// firstRequest sends the server preface on c and reads c's frames up to the
// first HEADERS, returning the bytes read less the acknowledgement of that
// preface (acked reports whether it was among them) and whether the request
// is a gRPC call (content-type application/grpc or application/grpc+…, but
// not gRPC-Web). A PING, or nothing within timeout, counts as gRPC.
func firstRequest(c net.Conn, timeout time.Duration) (frames []byte, grpc, acked bool, err error) {
	if _, err := c.Write(settingsFrame); err != nil {
		return nil, false, false, err
	}
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, false, false, err
	}
	defer c.SetReadDeadline(time.Time{})
	rec := &recorder{r: c, limit: maxSniffFrames}
	fr := http2.NewFramer(nil, rec)
	fr.SetMaxReadFrameSize(16 << 10) // the default, which the empty SETTINGS keeps
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = maxSniffFrames
	for {
		start := len(rec.buf)
		f, err := fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return rec.buf, true, acked, nil // an idle channel
			}
			return nil, false, false, err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() && !acked {
				rec.buf = rec.buf[:start] // ours: the server behind never sent it
				acked = true
			}
		case *http2.PingFrame:
			return rec.buf, true, acked, nil
		case *http2.MetaHeadersFrame:
			ct := ""
			for _, h := range f.Fields {
				if h.Name == "content-type" {
					ct = h.Value
				}
			}
			return rec.buf, isGRPCContentType(ct), acked, nil
		}
	}
}

// isGRPCContentType reports whether ct names the gRPC protocol over HTTP/2
// (application/grpc, application/grpc+proto, application/grpc;…), which
// gRPC-Web's application/grpc-web… does not.
func isGRPCContentType(ct string) bool {
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// recorder is an io.Reader over r that keeps every byte it returns, up to
// limit.
type recorder struct {
	r     io.Reader
	buf   []byte
	limit int
}

var errSniffTooLong = errors.New("splitter: no request in the first 64 KiB of an HTTP/2 connection")

func (r *recorder) Read(p []byte) (int, error) {
	if len(r.buf) >= r.limit {
		return 0, errSniffTooLong
	}
	p = p[:min(len(p), r.limit-len(r.buf))]
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

// ackDropConn is a replayConn that removes the first SETTINGS
// acknowledgement from the frames it reads, for an HTTP/2 connection whose
// client had not yet acknowledged the splitter's SETTINGS when its first
// request arrived. It passes every other frame through unchanged, and all
// bytes after that one.
type ackDropConn struct {
	*replayConn
	dropped bool
	head    [9]byte // the header of the frame being passed through
	pending []byte  // what of head is still to be returned
	body    int     // bytes of that frame's payload still to be returned
}

func (c *ackDropConn) Read(p []byte) (int, error) {
	for !c.dropped {
		switch {
		case len(c.pending) > 0:
			n := copy(p, c.pending)
			c.pending = c.pending[n:]
			return n, nil
		case c.body > 0:
			n, err := c.replayConn.Read(p[:min(len(p), c.body)])
			c.body -= n
			return n, err
		}
		if _, err := io.ReadFull(c.replayConn, c.head[:]); err != nil {
			return 0, err
		}
		length := int(c.head[0])<<16 | int(c.head[1])<<8 | int(c.head[2])
		if http2.FrameType(c.head[3]) == http2.FrameSettings && http2.Flags(c.head[4]).Has(http2.FlagSettingsAck) && length == 0 {
			c.dropped = true
			break
		}
		c.pending, c.body = c.head[:], length
	}
	return c.replayConn.Read(p)
}

// sniff reads from c until it can tell whether c starts with the HTTP/2
// preface: it stops after the full preface, or at the first byte that
// differs from it, so a short HTTP/1 request that waits for its response is
// classified at once. It never reads more than len(http2Preface) bytes.
func sniff(c net.Conn, timeout time.Duration) (prefix []byte, isH2 bool, err error) {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, false, err
	}
	buf := make([]byte, len(http2Preface))
	n := 0
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		n += m
		if !strings.HasPrefix(http2Preface, string(buf[:n])) {
			break // diverged: not HTTP/2 with prior knowledge
		}
		if err != nil {
			if n == len(buf) {
				break // full preface arrived together with an error
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, false, err
		}
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return nil, false, err
	}
	return buf[:n], n == len(http2Preface) && string(buf) == http2Preface, nil
}

// replayConn is a net.Conn whose first reads return prefix, the bytes
// already consumed by the sniff, before reading from the socket again.
type replayConn struct {
	net.Conn
	prefix []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the connection when the underlying one supports it
// (net/http uses this for a graceful close of HTTP/1 connections).
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// childListener is a net.Listener fed by a PrefaceSplitter.
type childListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newChildListener(addr net.Addr) *childListener {
	return &childListener{
		addr:  addr,
		conns: make(chan net.Conn),
		done:  make(chan struct{}),
	}
}

// deliver hands c to a caller of Accept, or closes it if the listener is
// closed first.
func (l *childListener) deliver(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *childListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *childListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *childListener) Addr() net.Addr { return l.addr }

// handshake runs the server side of a TLS handshake on c within timeout.
func handshake(c net.Conn, cfg *tls.Config, timeout time.Duration) (*tls.Conn, error) {
	tc := tls.Server(c, cfg)
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	if err := tc.Handshake(); err != nil {
		answerCleartextHTTP(err) // tls.go
		return nil, err
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return tc, nil
}
