package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	url2 "net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	_ "google.golang.org/grpc/encoding/gzip" // grpc-go takes gzip, as connect-go does
	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// TestJSONLoneSurrogate: a JSON string escaping half of a UTF-16 surrogate
// pair (in a field, a map key, a bytes field) is INVALID_FIELD naming the
// escape and its position, not protojson's "unexpected EOF".
func TestJSONLoneSurrogate(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	const pair = `is half of a UTF-16 surrogate pair, without the other half, which is no character: write a character above U+FFFF as the whole pair (\ud83d\ude00 for U+1F600), or as UTF-8`
	for _, tc := range []struct{ body, want string }{
		{`{"queue":"a","jobType":"t","idempotency_key":"\ud800"}`, `(line 1:47): \ud800 ` + pair},
		{`{"queue":"a","jobType":"t","headers":{"\ud800":"x"}}`, `(line 1:40): \ud800 ` + pair},
		{`{"queue":"a","jobType":"t","payload":"\udc00"}`, `(line 1:39): \udc00 ` + pair},
		{"{\"queue\":\"a\",\n \"jobType\":\"é\\ud83d\\u0041\"}", `(line 2:14): \ud83d ` + pair},
	} {
		status, body := postJSON(t, srv.URL+"/sepp.v1.JobService/Enqueue", tc.body)
		want := "request: cannot decode the sepp.v1.EnqueueRequest message: " + tc.want
		if status != 400 || reasonOf(t, body) != "INVALID_FIELD" || body["message"] != want {
			t.Errorf("%s: %d %v\nwant 400 INVALID_FIELD %q", tc.body, status, body, want)
		}
	}
	// A whole pair is a character.
	status, body := postJSON(t, srv.URL+"/sepp.v1.JobService/Enqueue", `{"queue":"a","jobType":"t","idempotencyKey":"\ud83d\ude00"}`)
	if status != 200 || !strings.HasPrefix(body["jobId"].(string), "0") {
		t.Fatalf("a whole pair: %d %v", status, body)
	}
}

// grpcFrame is one length-prefixed message of a gRPC or gRPC-Web body.
func grpcFrame(flag byte, msg []byte) []byte {
	b := []byte{flag, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// grpcAnswer is the status of a gRPC or gRPC-Web response, wherever it
// came: in the headers (trailers-only), the trailers, or gRPC-Web's
// trailer frame.
type grpcAnswer struct {
	httpStatus    int
	contentType   string
	code          string // grpc-status
	message       string
	reason, field string
	messages      [][]byte // the response's messages
}

func (a grpcAnswer) String() string {
	return fmt.Sprintf("HTTP %d %s grpc-status %s %s %q (%d messages)", a.httpStatus, a.contentType, a.code, a.reason, a.message, len(a.messages))
}

// postFrames sends body as a gRPC or gRPC-Web call (contentType says
// which) and reads the answer.
func postFrames(t *testing.T, hc *http.Client, url, contentType string, header http.Header, body []byte) grpcAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("TE", "trailers")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return answerOf(t, url, resp)
}

// answerOf reads the gRPC or gRPC-Web answer resp.
func answerOf(t *testing.T, url string, resp *http.Response) grpcAnswer {
	t.Helper()
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", url, err)
	}
	a := grpcAnswer{httpStatus: resp.StatusCode, contentType: resp.Header.Get("Content-Type")}
	fields := http.Header{}
	for _, h := range []http.Header{resp.Header, resp.Trailer} {
		for k, v := range h {
			fields[k] = v
		}
	}
	for len(raw) >= 5 {
		n := int(binary.BigEndian.Uint32(raw[1:5]))
		if len(raw) < 5+n {
			t.Fatalf("POST %s: a response frame announces %d bytes, %d came", url, n, len(raw)-5)
		}
		frame := raw[5 : 5+n]
		if raw[0]&1 != 0 { // compressed with the answer's grpc-encoding, gzip
			zr, err := gzip.NewReader(bytes.NewReader(frame))
			if err != nil {
				t.Fatalf("POST %s: a compressed response frame: %v", url, err)
			}
			if frame, err = io.ReadAll(zr); err != nil {
				t.Fatalf("POST %s: a compressed response frame: %v", url, err)
			}
		}
		if raw[0]&0x80 != 0 { // gRPC-Web's trailers
			for _, line := range strings.Split(strings.TrimSpace(string(frame)), "\r\n") {
				k, v, _ := strings.Cut(line, ":")
				fields.Set(k, strings.TrimSpace(v))
			}
		} else {
			a.messages = append(a.messages, frame)
		}
		raw = raw[5+n:]
	}
	a.code = fields.Get("Grpc-Status")
	a.message, _ = url2.PathUnescape(fields.Get("Grpc-Message"))
	if d := fields.Get("Grpc-Status-Details-Bin"); d != "" {
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d, "="))
		if err != nil {
			t.Fatalf("grpc-status-details-bin: %v", err)
		}
		var st spb.Status
		if err := proto.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		for _, any := range st.GetDetails() {
			var info errdetails.ErrorInfo
			if any.UnmarshalTo(&info) == nil {
				a.reason, a.field = info.GetReason(), info.GetMetadata()["field"]
			}
		}
	}
	return a
}

// grpcPaths are the ways a gRPC or gRPC-Web call reaches the server: each
// returns its client, content type and whether the call is gRPC-Web.
var grpcPaths = []struct {
	name   string
	client func(t *testing.T, srv *testserver.Server) *http.Client
	web    bool
}{
	// An HTTP/2 connection whose first request is a gRPC call is grpc-go's
	// own (the splitter).
	{"gRPC on grpc-go's transport", func(t *testing.T, _ *testserver.Server) *http.Client { return h2cClient(t) }, false},
	// A gRPC call on an HTTP/2 connection net/http serves goes to grpc-go's
	// ServeHTTP.
	{"gRPC on net/http's HTTP/2", h2cAfterHealthz, false},
	{"gRPC over HTTP/1.1 (connect-go)", http1Client, false},
	{"gRPC-Web over HTTP/1.1", http1Client, true},
	{"gRPC-Web over HTTP/2", h2cAfterHealthz, true},
}

func http1Client(t *testing.T, _ *testserver.Server) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// h2cAfterHealthz returns an HTTP/2 client whose connection's first request
// was GET /healthz, so net/http serves it.
func h2cAfterHealthz(t *testing.T, srv *testserver.Server) *http.Client {
	hc := h2cClient(t)
	resp, err := hc.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return hc
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGRPCMalformedFrames: a unary gRPC or gRPC-Web call whose body is not
// exactly one well-framed message (cut short, empty, two messages, the
// compressed flag without a grpc-encoding, a flag that is no request's) is
// INVALID_ARGUMENT, INVALID_FIELD "request", with a message that says what
// is wrong, on every way such a call reaches the server; grpc-go answered
// INTERNAL, connect-go INTERNAL or UNIMPLEMENTED. A message over
// limits.max_request_bytes is LIMIT_EXCEEDED from its prefix.
func TestGRPCMalformedFrames(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	msg, err := proto.Marshal(&seppv1.EnqueueRequest{Queue: "q", JobType: "t"})
	if err != nil {
		t.Fatal(err)
	}
	gzipHeader := http.Header{"Grpc-Encoding": {"gzip"}}
	const max = 5275648 // limits.max_request_bytes by default
	for _, path := range grpcPaths {
		hc := path.client(t, srv)
		ct := "application/grpc"
		if path.web {
			ct = "application/grpc-web"
		}
		call := func(header http.Header, body []byte) grpcAnswer {
			return postFrames(t, hc, srv.URL+"/sepp.v1.JobService/Enqueue", ct, header, body)
		}
		// A well-formed call first: on grpc-go's transport the connection
		// is the first call's.
		for _, ok := range []struct {
			name   string
			header http.Header
			body   []byte
		}{{"one message", nil, grpcFrame(0, msg)}, {"one gzipped message", gzipHeader, grpcFrame(1, gzipped(t, msg))}} {
			if a := call(ok.header, ok.body); a.httpStatus != 200 || a.code != "0" || len(a.messages) != 1 {
				t.Fatalf("%s, %s: %v; want grpc-status 0 and one message", path.name, ok.name, a)
			}
		}
		for _, tc := range []struct {
			name   string
			header http.Header
			body   []byte
			want   string
		}{
			{"no message", nil, nil, "the body holds no message, and a unary call sends exactly one: an empty message is the 5 bytes 00 00 00 00 00"},
			{"a cut prefix", nil, []byte{0, 0}, "the body ends inside the 5-byte prefix of its message: send the flag byte, the message's length in 4 bytes (big-endian), then the message"},
			{"a cut message", nil, grpcFrame(0, msg)[:len(msg)], fmt.Sprintf("the body ends inside its message: the prefix announces %d bytes, and fewer came; send the whole message, with its length in the prefix", len(msg))},
			{"two messages", nil, append(grpcFrame(0, msg), grpcFrame(0, msg)...), "the body goes on after its message, and a unary call sends exactly one: send one message, with its length in the prefix"},
			{"a byte after the message", nil, append(grpcFrame(0, msg), 0), "the body goes on after its message, and a unary call sends exactly one: send one message, with its length in the prefix"},
			{"compressed without grpc-encoding", nil, grpcFrame(1, msg), "the message's compressed flag is set, but the call names no grpc-encoding: name the compression in the grpc-encoding header, or send the message uncompressed with the flag 0"},
			{"compressed with grpc-encoding identity", http.Header{"Grpc-Encoding": {"identity"}}, grpcFrame(1, msg), "the message's compressed flag is set, but the call names no grpc-encoding: name the compression in the grpc-encoding header, or send the message uncompressed with the flag 0"},
			{"the trailer flag", nil, grpcFrame(0x80, msg), "the message's flag byte is 0x80: a request message's flag is 0, or 1 when it is compressed"},
		} {
			a := call(tc.header, tc.body)
			want := "request: " + tc.want
			if a.code != "3" || a.reason != "INVALID_FIELD" || a.field != "request" || a.message != want || len(a.messages) != 0 {
				t.Errorf("%s, %s: %v\nwant grpc-status 3 INVALID_FIELD (field request) %q", path.name, tc.name, a, want)
			}
		}
		big := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(big[1:], max+1)
		wantBig := fmt.Sprintf("the request message is %d bytes; the limit is %d (limits.max_request_bytes, derived from max_payload_bytes and max_batch_size unless set): send smaller requests, or split the batch", max+1, max)
		if a := call(nil, big); a.code != "8" || a.reason != "LIMIT_EXCEEDED" || a.message != wantBig {
			t.Errorf("%s, a prefix over the limit: %v\nwant grpc-status 8 LIMIT_EXCEEDED %q", path.name, a, wantBig)
		}
		// The server still serves the connection.
		if a := call(nil, grpcFrame(0, msg)); a.code != "0" {
			t.Fatalf("%s, after the malformed calls: %v", path.name, a)
		}
	}
}

// TestGRPCContentTypes: the answer to a gRPC or gRPC-Web call is in the
// codec its content type names. In JSON (application/grpc+json), JSON in
// and JSON out on every way a call reaches the server; grpc-go decoded the
// body as protobuf whatever the content type, and answered protobuf
// labelled application/grpc+json. A codec the server does not speak is
// refused: grpc-go answers INVALID_FIELD "content-type", connect-go 415
// Unsupported Media Type.
func TestGRPCContentTypes(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	msg, err := proto.Marshal(&seppv1.EnqueueRequest{Queue: "q", JobType: "t"})
	if err != nil {
		t.Fatal(err)
	}
	// A connect-go client in gRPC and JSON, on a connection of its own,
	// which is grpc-go's.
	jobs := seppv1connect.NewJobServiceClient(h2cClient(t), srv.URL, connect.WithGRPC(), connect.WithProtoJSON())
	if res, err := jobs.Enqueue(context.Background(), &seppv1.EnqueueRequest{Queue: "q", JobType: "t"}); err != nil || res.GetJobId() == "" {
		t.Fatalf("connect-go client, gRPC in JSON: %v %v", res, err)
	}
	for _, path := range grpcPaths {
		hc := path.client(t, srv)
		base := "application/grpc"
		if path.web {
			base = "application/grpc-web"
		}
		call := func(ct string, body []byte) grpcAnswer {
			return postFrames(t, hc, srv.URL+"/sepp.v1.JobService/Enqueue", ct, nil, body)
		}
		a := call(base+"+json", grpcFrame(0, []byte(`{"queue":"q","jobType":"t"}`)))
		var res map[string]any
		if a.code != "0" || a.contentType != base+"+json" || len(a.messages) != 1 || json.Unmarshal(a.messages[0], &res) != nil || res["jobId"] == nil {
			t.Errorf("%s, JSON: %v %q; want %s+json, grpc-status 0 and a JSON message with a jobId", path.name, a, a.messages, base)
		}
		// An error in JSON is an error like any other (the status is not
		// a message).
		a = call(base+"+json", grpcFrame(0, []byte(`{"queue":"q"}`)))
		if a.code != "3" || a.reason != "INVALID_FIELD" || a.field != "job_type" || len(a.messages) != 0 {
			t.Errorf("%s, JSON without a job type: %v", path.name, a)
		}
		// Protobuf labelled JSON does not decode as JSON.
		a = call(base+"+json", grpcFrame(0, msg))
		if a.code != "3" || a.reason != "INVALID_FIELD" || a.field != "request" || len(a.messages) != 0 {
			t.Errorf("%s, protobuf labelled JSON: %v; want INVALID_FIELD (field request)", path.name, a)
		}
		a = call(base+"+proto", grpcFrame(0, msg))
		if a.code != "0" || a.contentType != base+"+proto" || len(a.messages) != 1 || proto.Unmarshal(a.messages[0], &seppv1.EnqueueResponse{}) != nil {
			t.Errorf("%s, +proto: %v", path.name, a)
		}
		a = call(base+"+cbor", grpcFrame(0, msg))
		if a.httpStatus == http.StatusUnsupportedMediaType {
			continue // connect-go
		}
		want := "content-type: application/grpc+cbor names a codec this server does not speak: send protobuf (application/grpc or application/grpc+proto) or JSON (application/grpc+json)"
		if a.code != "3" || a.reason != "INVALID_FIELD" || a.field != "content-type" || a.message != want || len(a.messages) != 0 {
			t.Errorf("%s, +cbor: %v; want 415, or INVALID_FIELD (field content-type) %q", path.name, a, want)
		}
	}
}
