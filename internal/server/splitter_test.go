package server

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sepp-dev/sepp/internal/clock/clocktest"
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
// The splitter hands a connection on once it has classified it; not
// accepting one within clocktest.HangGuard means it never would.
func acceptAndRead(t *testing.T, l net.Listener, n int) string {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- c
		}
	}()
	var c net.Conn
	select {
	case c = <-accepted:
	case <-time.After(clocktest.HangGuard):
		t.Fatalf("no connection handed on after %v", clocktest.HangGuard)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	return string(buf)
}

// pipeListener is a net.Listener whose connections are in-memory pipes: a
// write to one returns once the other side has read all of it, so a test
// knows what the splitter has read.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial returns the client's end of a new connection.
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

func TestPrefaceSplitterRoutesHTTP2(t *testing.T) {
	// No request follows: after the timeout the connection counts as an
	// idle gRPC channel.
	ln := newPipeListener()
	sp := NewPrefaceSplitter(ln, 300*time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- sp.Serve() }()
	t.Cleanup(func() {
		sp.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	c := ln.dial()
	defer c.Close()
	// The preface arrives in two writes, the first read by the splitter
	// alone (a pipe's write returns once it is read), then frame bytes.
	want := http2Preface + "\x00\x00\x00\x04"
	go func() {
		c.Write([]byte(http2Preface[:5]))
		c.Write([]byte(http2Preface[5:]))
		go io.Copy(io.Discard, c) // the splitter's SETTINGS
		c.Write([]byte(want[len(http2Preface):]))
	}()
	if got := acceptAndRead(t, sp.HTTP2(), len(want)); got != want {
		t.Fatalf("HTTP2 child read %q, want %q", got, want)
	}
}

func TestPrefaceSplitterRoutesShortHTTP1(t *testing.T) {
	// With an hour to classify it, a connection handed on in the test's
	// time was not held for more bytes or for the timeout.
	sp := startSplitter(t, time.Hour)
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
	if got := acceptAndRead(t, sp.Other(), len(req)); got != req {
		t.Fatalf("Other child read %q, want %q", got, req)
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

// h2Frames is what a client sends on a new HTTP/2 connection: the preface,
// then frames written by build.
func h2Frames(t *testing.T, build func(fr *http2.Framer)) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(http2Preface)
	build(http2.NewFramer(&b, nil))
	return b.Bytes()
}

// headersFrame writes a HEADERS frame opening stream 1 with content type ct.
func headersFrame(t *testing.T, fr *http2.Framer, ct string) {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/x"}, {":authority", "a"}, {"content-type", ct}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// TestPrefaceSplitterRoutesHTTP2ByFirstRequest: an HTTP/2 connection goes to
// the gRPC side when its first request is gRPC (or it pings, or says nothing),
// to the other side otherwise; the splitter's SETTINGS frame comes first, and
// the client's acknowledgement of it never reaches the server behind, whether
// it came before the first request or after.
func TestPrefaceSplitterRoutesHTTP2ByFirstRequest(t *testing.T) {
	settings := func(fr *http2.Framer) {
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	}
	ack := func(fr *http2.Framer) { fr.WriteSettingsAck() }
	ping := func(fr *http2.Framer) { fr.WritePing(false, [8]byte{1}) }
	cases := []struct {
		name     string
		first    func(fr *http2.Framer) // sent before reading the splitter's SETTINGS
		after    func(fr *http2.Framer) // sent after
		grpc     bool
		want     func(fr *http2.Framer) // what the server behind reads
		wantLate func(fr *http2.Framer) // and then, sent after
	}{
		{"grpc after ack", settings, func(fr *http2.Framer) { ack(fr); headersFrame(t, fr, "application/grpc") }, true,
			func(fr *http2.Framer) { settings(fr); headersFrame(t, fr, "application/grpc") }, nil},
		{"grpc+proto", func(fr *http2.Framer) { settings(fr); headersFrame(t, fr, "application/grpc+proto") }, ack, true,
			func(fr *http2.Framer) { settings(fr); headersFrame(t, fr, "application/grpc+proto") }, ack},
		{"ping first", func(fr *http2.Framer) { settings(fr); ping(fr) }, nil, true,
			func(fr *http2.Framer) { settings(fr); ping(fr) }, nil},
		{"json, ack first", settings, func(fr *http2.Framer) { ack(fr); headersFrame(t, fr, "application/json") }, false,
			func(fr *http2.Framer) { settings(fr); headersFrame(t, fr, "application/json") }, nil},
		{"grpc-web, ack late", func(fr *http2.Framer) { settings(fr); headersFrame(t, fr, "application/grpc-web+proto") },
			func(fr *http2.Framer) { ping(fr); ack(fr); ping(fr) }, false,
			func(fr *http2.Framer) { settings(fr); headersFrame(t, fr, "application/grpc-web+proto") },
			func(fr *http2.Framer) { ping(fr); ping(fr) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := startSplitter(t, 5*time.Second)
			c, err := net.Dial("tcp", sp.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(h2Frames(t, tc.first)); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(settingsFrame))
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, settingsFrame) {
				t.Fatalf("the splitter's first bytes: %x %v, want an empty SETTINGS frame", got, err)
			}
			if tc.after != nil {
				var b bytes.Buffer
				tc.after(http2.NewFramer(&b, nil))
				if _, err := c.Write(b.Bytes()); err != nil {
					t.Fatal(err)
				}
			}
			want := h2Frames(t, tc.want)
			if tc.wantLate != nil {
				var b bytes.Buffer
				tc.wantLate(http2.NewFramer(&b, nil))
				want = append(want, b.Bytes()...)
			}
			side := sp.Other()
			if tc.grpc {
				side = sp.HTTP2()
			}
			if got := acceptAndRead(t, side, len(want)); got != string(want) {
				t.Fatalf("the server behind read\n%x\nwant\n%x", got, want)
			}
		})
	}
}
