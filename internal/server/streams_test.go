package server_test

import (
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sepp-dev/sepp/internal/testserver"
)

// TestMaxStreamsPerConnection: both HTTP/2 stacks announce
// limits.max_streams_per_connection in their SETTINGS, so a client queues
// calls beyond it instead of opening them.
func TestMaxStreamsPerConnection(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: "[limits]\nmax_streams_per_connection = 7\n"})
	for _, ct := range []string{"application/grpc", "application/json"} {
		t.Run(ct, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			var hb bytes.Buffer
			enc := hpack.NewEncoder(&hb)
			for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/sepp.v1.JobService/GetJob"},
				{":authority", srv.Addr}, {"content-type", ct}} {
				enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			c.Write([]byte(http2.ClientPreface))
			fr := http2.NewFramer(c, c)
			fr.WriteSettings()
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("no SETTINGS with MAX_CONCURRENT_STREAMS: %v", err)
				}
				sf, ok := f.(*http2.SettingsFrame)
				if !ok || sf.IsAck() {
					continue
				}
				if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); ok {
					if v != 7 {
						t.Fatalf("MAX_CONCURRENT_STREAMS %d, want 7", v)
					}
					return
				}
			}
		})
	}
}
