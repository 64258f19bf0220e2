package server

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"time"
)

// http2Preface opens every HTTP/2 connection made with prior knowledge, which
// is how gRPC clients (grpc-go, grpcurl, buf curl --protocol grpc) connect.
var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// prefaceTimeout bounds how long a new connection may take to send its first
// bytes before it is dropped.
const prefaceTimeout = 10 * time.Second

// splitListener serves two protocols on one port. It accepts from the real
// listener and routes each connection by its first bytes: the HTTP/2 preface
// goes to the gRPC listener (grpc-go's own transport, the fast path), anything
// else (HTTP/1.1: Connect JSON from curl, gRPC-Web, /metrics) to the HTTP
// listener. The accept goroutine is owned by the splitListener and ends when
// the real listener is closed.
type splitListener struct {
	ln   net.Listener
	grpc *childListener
	http *childListener
}

func newSplitListener(ln net.Listener) *splitListener {
	s := &splitListener{ln: ln, grpc: newChildListener(ln.Addr()), http: newChildListener(ln.Addr())}
	go s.acceptLoop()
	return s
}

func (s *splitListener) acceptLoop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.grpc.closeWith(err)
			s.http.closeWith(err)
			return
		}
		go s.route(c)
	}
}

// route reads just enough of c to tell HTTP/2 from HTTP/1 and hands it on
// with those bytes replayed.
func (s *splitListener) route(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(prefaceTimeout))
	buf := make([]byte, 0, len(http2Preface))
	for len(buf) < len(http2Preface) && bytes.HasPrefix(http2Preface, buf) {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			c.Close()
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &prefixConn{Conn: c, prefix: buf}
	if bytes.Equal(buf, http2Preface) {
		s.grpc.deliver(pc)
	} else {
		s.http.deliver(pc)
	}
}

// childListener is a net.Listener fed by a splitListener.
type childListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error
}

func newChildListener(addr net.Addr) *childListener {
	return &childListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

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
		return nil, l.err
	}
}

func (l *childListener) closeWith(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.done)
	})
}

func (l *childListener) Close() error {
	l.closeWith(net.ErrClosed)
	return nil
}

func (l *childListener) Addr() net.Addr { return l.addr }

// prefixConn replays the bytes read while routing before reading on.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
