package testserver

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to a target address,
// so a test can take the target away (Down: the port closes and every
// forwarded connection drops) and bring it back (Up: the same port listens
// again), as when a database becomes unreachable and returns.
type Proxy struct {
	// Addr is the proxy's host:port.
	Addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

// StartProxy starts a proxy to target on a free loopback port; it is taken
// down when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Down)
	return p
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *Proxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // down while dialling
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	go pipe(s, c)
	go pipe(c, s)
}

// Down closes the proxy's port and every connection it forwards.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Up listens on the proxy's port again.
func (p *Proxy) Up(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatalf("proxy: listen again at %s: %v", p.Addr, err)
	}
	p.serve(ln)
}
