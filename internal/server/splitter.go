package server

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// http2Preface is the client connection preface every HTTP/2 connection
// starts with (RFC 9113, section 3.4). Over cleartext TCP a client that sends
// it speaks HTTP/2 with prior knowledge, which is what gRPC clients do.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// PrefaceSplitter splits one net.Listener in two by sniffing the first bytes
// of every accepted connection: connections that open with the HTTP/2 client
// preface are handed to [PrefaceSplitter.HTTP2], every other connection
// (in practice HTTP/1.x) to [PrefaceSplitter.Other].
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
		go s.dispatch(c)
	}
}

// dispatch sniffs c and hands it to the matching child listener.
func (s *PrefaceSplitter) dispatch(c net.Conn) {
	prefix, isH2, err := sniff(c, s.timeout)
	if err != nil {
		c.Close()
		return
	}
	wc := &replayConn{Conn: c, prefix: prefix}
	if isH2 {
		s.h2.deliver(wc)
	} else {
		s.other.deliver(wc)
	}
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
