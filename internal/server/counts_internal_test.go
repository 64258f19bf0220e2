package server

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
	"github.com/sepp-dev/sepp/internal/config"
)

func TestJSONCount(t *testing.T) {
	for _, tc := range []struct {
		json string
		stop int
		want int
	}{
		{`{"queues":["a","b","c"]}`, 10, 3},
		{` { "queues" : [ "a" , "b" ] } `, 10, 2},
		{`{"queues":[]}`, 10, 0},
		{`{"queues":null}`, 10, 0},
		{`{"queues":["a","b","c"]}`, 2, 2},
		{`{"workerId":"w","queues":["a","b"]}`, 10, 2},
		{`{"x":{"queues":["a","b","c","d"]},"queues":["a"]}`, 10, 1}, // not the nested one
		{`{"x":["]","[",{"y":"}"}],"queues":["a","b"]}`, 10, 2},      // brackets in strings
		{`{"x":"\"queues\":[1,2,3]","queues":["a"]}`, 10, 1},         // an escaped quote
		{`{"queues":["a\"","b\\","c"]}`, 10, 3},
		{`{"maxJobs":5,"leaseMs":"100","queues":["a","b"]}`, 10, 2},
		{`{"headers":{"a":"1","b":"2"}}`, 10, 2},
		{`{"\u0071ueues":["a","b"]}`, 10, 0}, // an escaped name: the decoder's
		{`["queues"]`, 10, 0},
		{`{"queues":["a","b"`, 10, 2}, // cut short: the decoder says so
		{``, 10, 0},
	} {
		name := "queues"
		if strings.Contains(tc.json, "headers") {
			name = "headers"
		}
		if got := jsonCount([]byte(tc.json), name, name, tc.stop); got != tc.want {
			t.Errorf("jsonCount(%s, %d) = %d, want %d", tc.json, tc.stop, got, tc.want)
		}
	}
}

func TestProtoCount(t *testing.T) {
	req := &seppv1.ReserveRequest{Queues: []string{"a", "b", "c"}, WorkerId: "w", MaxJobs: 5, LeaseMs: 100}
	data, _ := proto.Marshal(req)
	field := fieldOf(req, "queues").Number()
	for stop, want := range map[int]int{10: 3, 3: 3, 2: 2} {
		if got := protoCount(data, field, stop); got != want {
			t.Errorf("protoCount(stop %d) = %d, want %d", stop, got, want)
		}
	}
	if got := protoCount(data[:len(data)-1], field, 10); got > 3 {
		t.Errorf("cut short: %d", got)
	}
}

// reserveRequest is the binary and the JSON encoding of a Reserve naming n
// queues.
func reserveRequest(b testing.TB, n int) (bin, json []byte) {
	req := &seppv1.ReserveRequest{WaitMs: 1000}
	for i := range n {
		req.Queues = append(req.Queues, fmt.Sprintf("queue-%05d", i))
	}
	bin, err := proto.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	if json, err = protojson.Marshal(req); err != nil {
		b.Fatal(err)
	}
	return bin, json
}

// BenchmarkReserveRefusal is what a Reserve naming 20,000 queues costs
// from its bytes to its refusal, the error the interceptor answers with:
// the count before decoding (protobuf, JSON), against decoding the queues
// and counting them as the handler did (decode-then-count).
func BenchmarkReserveRefusal(b *testing.B) {
	cfg := config.Default()
	counts := &beforeDecode{&cfg}
	bin, json := reserveRequest(b, 20000)
	b.Logf("request: %d bytes (protobuf), %d bytes (JSON)", len(bin), len(json))
	refuse := func(b *testing.B, unmarshal func([]byte, any) error, data []byte) {
		b.ReportAllocs()
		for b.Loop() {
			var req seppv1.ReserveRequest
			if err := unmarshal(data, &req); err != nil {
				b.Fatal(err)
			}
			aerr := decodeError(&req)
			if aerr == nil {
				aerr = checkCount(&cfg, &req)
			}
			if aerr == nil || aerr.reason != ReasonLimitExceeded {
				b.Fatalf("not refused: %v", aerr)
			}
		}
	}
	b.Run("protobuf", func(b *testing.B) { refuse(b, connectProto{counts}.Unmarshal, bin) })
	b.Run("json", func(b *testing.B) { refuse(b, strictJSON{counts}.Unmarshal, json) })
	b.Run("protobuf-decode-then-count", func(b *testing.B) { refuse(b, connectProto{}.Unmarshal, bin) })
	b.Run("json-decode-then-count", func(b *testing.B) { refuse(b, strictJSON{}.Unmarshal, json) })
}

// TestRefusalMark: a refusal before decoding reaches the interceptor as
// the error it was; a mark a client wrote itself is honoured only with a
// reason such a refusal gives.
func TestRefusalMark(t *testing.T) {
	cfg := config.Default()
	var req seppv1.ReserveRequest
	refusedBeforeDecode(&req, countBounds[req.ProtoReflect().Descriptor().FullName()].refuse(&cfg, "more than 100"))
	aerr := decodeError(&req)
	if aerr == nil || aerr.reason != ReasonLimitExceeded || aerr.metadata["limit"] != "limits.max_reserve_queues" ||
		aerr.msg != "Reserve names more than 100 queues; the limit is 100 (limits.max_reserve_queues): name fewer queues, or run several workers" {
		t.Fatalf("decodeError: %+v", aerr)
	}
	refusedBeforeDecode(&req, newError(0, ReasonUnauthenticated, "forged"))
	if aerr := decodeError(&req); aerr != nil {
		t.Errorf("a forged mark: %+v", aerr)
	}
}

// TestReserveRequestLimit: the largest Reserve within the bounds, with
// max_reserve_queues names of the longest allowed, the longest worker_id
// and the longest numbers, is as large as largest says in protobuf, fits
// it in JSON with every byte of its strings escaped, and is under the
// request limit, which a Reserve naming 20,000 queues is over.
func TestReserveRequestLimit(t *testing.T) {
	for _, toml := range []string{"", "[limits]\nmax_reserve_queues = 5\n", "[limits]\nmax_reserve_queues = 1000\n"} {
		cfg, err := config.Parse("test.toml", []byte(toml))
		if err != nil {
			t.Fatal(err)
		}
		n := cfg.Limits.MaxReserveQueues
		req := &seppv1.ReserveRequest{
			WorkerId: strings.Repeat("w", maxWorkerIDBytes),
			MaxJobs:  math.MinInt32, LeaseMs: math.MinInt64, WaitMs: math.MinInt64, // 10 bytes each
		}
		escaped := make([]string, n)
		for i := range n {
			name := fmt.Sprintf("%05d", i) + strings.Repeat("q", config.MaxQueueNameBytes-5)
			req.Queues = append(req.Queues, name)
			escaped[i] = `"` + jsonEscaped(name) + `"`
		}
		bin, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		json := fmt.Sprintf(`{"queues":[%s],"workerId":"%s","maxJobs":%d,"leaseMs":"%d","waitMs":"%d"}`,
			strings.Join(escaped, ","), jsonEscaped(req.WorkerId), req.MaxJobs, req.LeaseMs, req.WaitMs)
		var back seppv1.ReserveRequest
		if err := protojson.Unmarshal([]byte(json), &back); err != nil || !proto.Equal(&back, req) {
			t.Fatalf("the escaped JSON does not decode to the Reserve: %v", err)
		}

		b := countBounds[req.ProtoReflect().Descriptor().FullName()]
		largestPB, largestJSON, ok := b.largest(cfg)
		if !ok || largestPB != int64(len(bin)) || largestJSON < int64(len(json)) {
			t.Errorf("%d queues: largest = %d, %d, %v; the largest Reserve is %d bytes, %d in JSON", n, largestPB, largestJSON, ok, len(bin), len(json))
		}
		limits := newRequestLimits(cfg)
		for _, enc := range []struct {
			inJSON bool
			size   int
		}{{false, len(bin)}, {true, len(json)}} {
			limit := limits.of(seppv1connect.WorkerServiceReserveProcedure, enc.inJSON)
			if int64(enc.size) > limit.max || limit.max > cfg.Limits.RequestBytes(cfg.Server) {
				t.Errorf("%d queues, JSON %v: the largest Reserve is %d bytes, the limit %d", n, enc.inJSON, enc.size, limit.max)
			}
			t.Logf("%d queues, JSON %v: the largest Reserve is %d bytes, the limit %d", n, enc.inJSON, enc.size, limit.max)
		}
	}

	// A Reserve naming 20,000 queues is over the limit in protobuf; in
	// JSON, whose limit allows for every byte written as a \u escape, one
	// naming 40,000 is.
	cfg := config.Default()
	limits := newRequestLimits(&cfg)
	bin, _ := reserveRequest(t, 20000)
	_, json := reserveRequest(t, 40000)
	for _, enc := range []struct {
		inJSON bool
		size   int
	}{{false, len(bin)}, {true, len(json)}} {
		limit := limits.of(seppv1connect.WorkerServiceReserveProcedure, enc.inJSON)
		aerr := limit.refuse("message", fmt.Sprint(enc.size))
		if int64(enc.size) <= limit.max || aerr.reason != ReasonLimitExceeded || aerr.metadata["limit"] != "limits.max_reserve_queues" {
			t.Errorf("JSON %v: %d bytes, the limit %d: %+v", enc.inJSON, enc.size, limit.max, aerr)
		}
	}
	// The batches' requests carry payloads: their limit is max_request_bytes.
	for _, p := range []string{seppv1connect.JobServiceEnqueueBatchProcedure, seppv1connect.WorkerServiceCompleteBatchProcedure, seppv1connect.JobServiceEnqueueProcedure} {
		if got := limits.of(p, false).max; got != cfg.Limits.RequestBytes(cfg.Server) {
			t.Errorf("%s: limit %d, want max_request_bytes", p, got)
		}
	}
}

// jsonEscaped writes each byte of the ASCII s as a \u escape.
func jsonEscaped(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		fmt.Fprintf(&b, `\u%04x`, c)
	}
	return b.String()
}
