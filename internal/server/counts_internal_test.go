package server

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
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
func reserveRequest(b *testing.B, n int) (bin, json []byte) {
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
