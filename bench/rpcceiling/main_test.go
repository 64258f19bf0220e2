package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServerC checks that the split server answers a grpc-go call over
// HTTP/2 and Connect calls over HTTP/1.1 (connect-go JSON client and a
// curl-like plain POST) on the same port.
func TestServerC(t *testing.T) {
	addr, stop, err := startSplit("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, c := range []struct {
		name string
		new  func(string, int) (caller, error)
	}{
		{"grpc-go over HTTP/2", newGRPCCaller},
		{"connect-go JSON over HTTP/1.1", newConnectJSONCaller},
	} {
		cl, err := c.new(addr, 1)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := cl.call(ctx); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		cl.close()
	}

	// The equivalent of
	// curl -X POST -H 'Content-Type: application/json' -d '{}' http://ADDR/sepp.v1.JobService/GetJob
	resp, err := http.Post("http://"+addr+"/sepp.v1.JobService/GetJob", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 1 || strings.TrimSpace(string(body)) != "{}" {
		t.Fatalf("plain POST: %s %s %q, want HTTP/1.x 200 \"{}\"", resp.Proto, resp.Status, body)
	}
}
