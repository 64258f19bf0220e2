package server

import (
	"io"
	"net"
	"testing"
	"time"
)

// startSplitter returns a running splitter on a loopback port.
func startSplitter(t *testing.T, timeout time.Duration) *PrefaceSplitter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp := NewPrefaceSplitter(ln, timeout)
	done := make(chan error, 1)
	go func() { done <- sp.Serve() }()
	t.Cleanup(func() {
		sp.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return sp
}

// acceptAndRead accepts one connection from l and reads n bytes from it.
func acceptAndRead(t *testing.T, l net.Listener, n int) string {
	t.Helper()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	return string(buf)
}

func TestPrefaceSplitterRoutesHTTP2(t *testing.T) {
	sp := startSplitter(t, 5*time.Second)
	c, err := net.Dial("tcp", sp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The preface arrives in two writes, followed by frame bytes.
	want := http2Preface + "\x00\x00\x00\x04"
	go func() {
		c.Write([]byte(http2Preface[:5]))
		time.Sleep(20 * time.Millisecond)
		c.Write([]byte(want[5:]))
	}()
	if got := acceptAndRead(t, sp.HTTP2(), len(want)); got != want {
		t.Fatalf("HTTP2 child read %q, want %q", got, want)
	}
}

func TestPrefaceSplitterRoutesShortHTTP1(t *testing.T) {
	sp := startSplitter(t, 5*time.Second)
	c, err := net.Dial("tcp", sp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Shorter than the preface: must be classified without waiting for
	// more bytes (which would never come) or for the timeout.
	req := "GET / HTTP/1.0\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got := acceptAndRead(t, sp.Other(), len(req)); got != req {
		t.Fatalf("Other child read %q, want %q", got, req)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("classification took %v", d)
	}
}

func TestPrefaceSplitterClosesSilentConn(t *testing.T) {
	sp := startSplitter(t, 100*time.Millisecond)
	c, err := net.Dial("tcp", sp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("PRI * HTTP")) // a partial preface, then silence
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after sniff timeout: %v, want EOF", err)
	}
}

func TestPrefaceSplitterCloseUnblocksAccept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp := NewPrefaceSplitter(ln, time.Second)
	done := make(chan error, 1)
	go func() { done <- sp.Serve() }()
	accepted := make(chan error, 2)
	for _, l := range []net.Listener{sp.HTTP2(), sp.Other()} {
		go func() {
			_, err := l.Accept()
			accepted <- err
		}()
	}
	sp.Close()
	for range 2 {
		if err := <-accepted; err != net.ErrClosed {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
