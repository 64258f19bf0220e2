package server

import (
	"fmt"
	"math"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/config"
)

// This file is the one home of the bounds on how many items a list of a
// request holds: the queues of a Reserve, the jobs of an EnqueueBatch, the
// completions of a CompleteBatch, the headers of an Enqueue. Each is
// checked twice, with the same refusal:
//
//   - on the request's bytes, before they are decoded (countBounds.check,
//     which the codecs of both stacks call, decode.go and codec.go): the
//     items are counted only up to one past the bound, so a Reserve naming
//     20,000 queues is refused for the cost of stepping over 101 of them,
//     not of decoding 20,000 strings;
//   - on the decoded message, in the handlers (checkCount), for a request
//     that came another way (a webhook's enqueue) or that the count on the
//     bytes could not follow (a JSON member name written with escapes).
//
// The headers of the jobs of an EnqueueBatch are bounded per job, and a job
// over its bound fails alone in a batch that is not atomic, so they are
// counted in the handler only: the request's size (limits.max_request_bytes)
// bounds what they cost to decode.
//
// A request whose every string is bounded too (a Reserve: its queue names
// and worker_id) has a largest size within its list's bound, and one larger
// is refused from its length, before any of it is read, with the list's
// reason (requestLimits): the gRPC length prefix (readUnary) or the HTTP
// Content-Length (limitBody). A Reserve naming 20,000 queues, 260 KB, is
// then neither kept nor decoded; the server reads off the connection only
// what the client sent before the refusal reached it (docs/benchmarks.md).
// The other lists' requests carry payloads (a job's, a completion's
// result) of up to max_payload_bytes each, so max_request_bytes is the
// tighter bound on their size.

// countBound bounds the items of one list: a repeated or map field at the
// top level of a request message.
type countBound struct {
	field protoreflect.FieldDescriptor
	// max is the most items the list may hold.
	max func(*config.Config) int
	// refuse is the error of a list over max; n says how many items it
	// holds, "150", or "more than 100" when the count stopped early.
	refuse func(cfg *config.Config, n string) *apiError
	// stringBytes bounds, by field name, each string of the request,
	// the list's items among them; nil when a field of the request has no
	// bound, and then its size is not derived (largest).
	stringBytes map[protoreflect.Name]int
	// refuseSize is the error of a request larger than any within max can
	// be: what is "message" (its gRPC length prefix) or "body" (its
	// Content-Length), size its length ("260003", or "more than 90000"),
	// bound the request limit (requestLimits).
	refuseSize func(cfg *config.Config, what, size string, bound int64) *apiError
}

// countBounds are the bounds, by the full name of the request message.
var countBounds = bounds(
	countBound{
		field: fieldOf(&seppv1.ReserveRequest{}, "queues"),
		max:   func(c *config.Config) int { return c.Limits.MaxReserveQueues },
		refuse: func(c *config.Config, n string) *apiError {
			l := c.Limits.MaxReserveQueues
			return limitExceeded("max_reserve_queues", int64(l),
				"Reserve names %s queues; the limit is %d (limits.max_reserve_queues): name fewer queues, or run several workers", n, l)
		},
		stringBytes: map[protoreflect.Name]int{"queues": config.MaxQueueNameBytes, "worker_id": maxWorkerIDBytes},
		refuseSize: func(c *config.Config, what, size string, bound int64) *apiError {
			l := c.Limits.MaxReserveQueues
			return limitExceeded("max_reserve_queues", int64(l),
				"the Reserve request %s is %s bytes, more than any Reserve naming at most %d queues can be (%d bytes; limits.max_reserve_queues): name fewer queues, or run several workers", what, size, l, bound)
		},
	},
	countBound{
		field: fieldOf(&seppv1.EnqueueBatchRequest{}, "jobs"),
		max:   func(c *config.Config) int { return c.Server.MaxBatchSize },
		refuse: func(c *config.Config, n string) *apiError {
			return newError(connect.CodeInvalidArgument, ReasonBatchTooLarge,
				"batch has %s jobs; the limit is %d (max_batch_size): split it into smaller batches", n, c.Server.MaxBatchSize)
		},
	},
	countBound{
		field: fieldOf(&seppv1.CompleteBatchRequest{}, "completions"),
		max:   func(c *config.Config) int { return c.Server.MaxBatchSize },
		refuse: func(c *config.Config, n string) *apiError {
			return newError(connect.CodeInvalidArgument, ReasonBatchTooLarge,
				"batch has %s completions; the limit is %d (max_batch_size): split it", n, c.Server.MaxBatchSize)
		},
	},
	countBound{
		field: fieldOf(&seppv1.EnqueueRequest{}, "headers"),
		max:   func(*config.Config) int { return maxHeaderEntryCount },
		refuse: func(_ *config.Config, n string) *apiError {
			return invalidField("headers", "has %s entries; the limit is %d", n, maxHeaderEntryCount)
		},
	},
)

// The margin of a request limit over the largest request within the
// bounds: twice its size, for fields a newer client sends that this server
// does not know and for JSON's white space, and 4 KiB, for the framing a
// compressed message adds.
const (
	requestLimitFactor = 2
	requestLimitSlack  = 4 << 10
)

// jsonEscapeBytes is the most bytes JSON text may write one byte of a
// string in: \u0041 for "A".
const jsonEscapeBytes = 6

// largest is the size of the largest request within b, in protobuf and in
// JSON: the list holds its maximum of items, each string field as many
// bytes as stringBytes allows, written wholly in \u escapes in JSON, and
// each number field its longest value. ok is false when a field of the
// request has no such bound.
func (b countBound) largest(cfg *config.Config) (protobuf, json int64, ok bool) {
	fields := b.field.ContainingMessage().Fields()
	json = int64(len("{}"))
	for i := range fields.Len() {
		f := fields.Get(i)
		items := int64(1)
		if f.Number() == b.field.Number() {
			items = int64(b.max(cfg))
		} else if f.IsList() || f.IsMap() {
			return 0, 0, false
		}
		tag := int64(protowire.SizeTag(f.Number()))
		var pb, js int64
		switch f.Kind() {
		case protoreflect.StringKind:
			n, bounded := b.stringBytes[f.Name()]
			if !bounded {
				return 0, 0, false
			}
			pb = tag + int64(protowire.SizeBytes(n))
			js = int64(len(`""`)) + jsonEscapeBytes*int64(n)
		case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind,
			protoreflect.Sint32Kind, protoreflect.Sint64Kind, protoreflect.BoolKind:
			pb = tag + int64(protowire.SizeVarint(math.MaxUint64)) // a negative int32 takes 10 bytes too
			js = int64(len(`"-9223372036854775808"`))
		default:
			return 0, 0, false
		}
		name := int64(max(len(f.JSONName()), len(f.TextName())))
		protobuf += items * pb
		// "name":[item,item],
		json += name + int64(len(`"":[],`)) + items*(js+int64(len(",")))
	}
	return protobuf, json, true
}

// requestLimit is the largest request message the transports read for a
// procedure, and the refusal of a larger one, which they decide from its
// length before they read any of it.
type requestLimit struct {
	max int64
	// refuse is the error of a request size bytes long ("260003", or
	// "more than 90000"); what is "message" (a gRPC length prefix) or
	// "body" (an HTTP body).
	refuse func(what, size string) *apiError
}

// requestLimits are the request limits of the procedures.
type requestLimits struct {
	// any is limits.max_request_bytes, for every procedure.
	any requestLimit
	// byPath are the tighter limits of the requests a countBound bounds
	// wholly, by procedure ("/sepp.v1.WorkerService/Reserve"): in
	// protobuf, and in JSON.
	byPath map[string][2]requestLimit
}

func newRequestLimits(cfg *config.Config) requestLimits {
	l := requestLimits{any: anyRequestLimit(cfg.Limits.RequestBytes(cfg.Server)), byPath: map[string][2]requestLimit{}}
	for _, name := range serviceNames {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			panic(fmt.Sprintf("service %s: %v", name, err)) // seppv1 registers it
		}
		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			m := methods.Get(i)
			if limits, ok := l.boundOf(cfg, m.Input()); ok {
				l.byPath["/"+name+"/"+string(m.Name())] = limits
			}
		}
	}
	return l
}

// boundOf returns the limits of the request message md, protobuf and
// JSON, when a countBound bounds it wholly.
func (l requestLimits) boundOf(cfg *config.Config, md protoreflect.MessageDescriptor) (limits [2]requestLimit, ok bool) {
	b, ok := countBounds[md.FullName()]
	if !ok || b.refuseSize == nil {
		return limits, false
	}
	protobuf, json, ok := b.largest(cfg)
	if !ok {
		return limits, false
	}
	for i, largest := range [2]int64{protobuf, json} {
		limits[i] = l.any
		if bound := requestLimitFactor*largest + requestLimitSlack; bound < l.any.max {
			limits[i] = requestLimit{max: bound, refuse: func(what, size string) *apiError { return b.refuseSize(cfg, what, size, bound) }}
		}
	}
	return limits, true
}

// of returns the limit of a request to path, in JSON or protobuf.
func (l requestLimits) of(path string, inJSON bool) requestLimit {
	limits, ok := l.byPath[path]
	switch {
	case !ok:
		return l.any
	case inJSON:
		return limits[1]
	}
	return limits[0]
}

// anyRequestLimit is limits.max_request_bytes, max.
func anyRequestLimit(max int64) requestLimit {
	return requestLimit{max: max, refuse: func(what, size string) *apiError {
		return limitExceeded("max_request_bytes", max,
			"the request %s is %s bytes; the limit is %d (limits.max_request_bytes, derived from max_payload_bytes and max_batch_size unless set): send smaller requests, or split the batch", what, size, max)
	}}
}

func fieldOf(m proto.Message, name protoreflect.Name) protoreflect.FieldDescriptor {
	return m.ProtoReflect().Descriptor().Fields().ByName(name)
}

func bounds(bs ...countBound) map[protoreflect.FullName]countBound {
	out := make(map[protoreflect.FullName]countBound, len(bs))
	for _, b := range bs {
		out[b.field.ContainingMessage().FullName()] = b
	}
	return out
}

// checkCount refuses the decoded request m when its list holds more items
// than its bound.
func checkCount(cfg *config.Config, m proto.Message) *apiError {
	r := m.ProtoReflect()
	b, ok := countBounds[r.Descriptor().FullName()]
	if !ok {
		return nil
	}
	var n int
	if b.field.IsMap() {
		n = r.Get(b.field).Map().Len()
	} else {
		n = r.Get(b.field).List().Len()
	}
	if max := b.max(cfg); n > max {
		return b.refuse(cfg, fmt.Sprint(n))
	}
	return nil
}

// beforeDecode checks the bounds on a request's bytes, for the codecs. A
// nil *beforeDecode checks nothing.
type beforeDecode struct{ cfg *config.Config }

// check refuses the request m will be decoded from, data (protobuf, or
// JSON when inJSON), when its list holds more items than its bound. It
// does not judge whether data decodes: a request it cannot follow is left
// to the decoder and checkCount.
func (p *beforeDecode) check(m proto.Message, data []byte, inJSON bool) *apiError {
	if p == nil {
		return nil
	}
	b, ok := countBounds[m.ProtoReflect().Descriptor().FullName()]
	if !ok {
		return nil
	}
	max := b.max(p.cfg)
	var n int
	if inJSON {
		n = jsonCount(data, b.field.JSONName(), b.field.TextName(), max+1)
	} else {
		n = protoCount(data, b.field.Number(), max+1)
	}
	if n > max {
		return b.refuse(p.cfg, fmt.Sprintf("more than %d", max))
	}
	return nil
}

// protoCount counts the fields numbered num at the top level of the
// protobuf message data, up to stop. Each item of a repeated or map field
// is a field of its own (Sepp's lists hold strings and messages, never
// packed). It stops, with what it counted, at bytes that do not parse.
func protoCount(data []byte, num protowire.Number, stop int) int {
	n := 0
	for len(data) > 0 && n < stop {
		f, typ, l := protowire.ConsumeTag(data)
		if l < 0 {
			return n
		}
		data = data[l:]
		if f == num && typ == protowire.BytesType {
			n++
		}
		if l = protowire.ConsumeFieldValue(f, typ, data); l < 0 {
			return n
		}
		data = data[l:]
	}
	return n
}

// jsonCount counts the elements of the array, or the members of the
// object, that is the value of the member named name or alt in the JSON
// object data, up to stop. It reads data only as far as it must: the
// members before that one, each stepped over, and stop items of it. It
// stops, with what it counted, at text it does not follow (not an object,
// a member name with escapes); the decoder judges that text.
func jsonCount(data []byte, name, alt string, stop int) int {
	s := jsonSkim{data: data}
	if !s.byte('{') {
		return 0
	}
	for !s.byte('}') {
		key, ok := s.plainString()
		if !ok || !s.byte(':') {
			return 0
		}
		if key == name || key == alt {
			return s.countItems(stop)
		}
		if !s.value() {
			return 0
		}
		s.byte(',')
	}
	return 0
}

// jsonSkim steps through JSON text without decoding it.
type jsonSkim struct {
	data []byte
	i    int
}

func (s *jsonSkim) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte steps over c, after any space, if it is next.
func (s *jsonSkim) byte(c byte) bool {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

// plainString reads a string without escapes.
func (s *jsonSkim) plainString() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	start := s.i
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '"':
			s.i++
			return string(s.data[start : s.i-1]), true
		case '\\':
			return "", false
		}
		s.i++
	}
	return "", false
}

// countItems counts the items of the array or object that comes next, up
// to stop.
func (s *jsonSkim) countItems(stop int) int {
	s.space()
	if s.i >= len(s.data) || (s.data[s.i] != '[' && s.data[s.i] != '{') {
		return 0 // null, or not a list: the decoder says so
	}
	object := s.data[s.i] == '{'
	end := byte(']')
	if object {
		end = '}'
	}
	s.i++
	n := 0
	for n < stop && !s.byte(end) {
		if object {
			if !s.value() || !s.byte(':') {
				return n
			}
		}
		if !s.value() {
			return n
		}
		n++
		s.byte(',')
	}
	return n
}

// value steps over one value: a string, an array or object (whole), or a
// number or literal.
func (s *jsonSkim) value() bool {
	s.space()
	if s.i >= len(s.data) {
		return false
	}
	switch s.data[s.i] {
	case '"':
		return s.string()
	case '[', '{':
		return s.container()
	}
	start := s.i
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ',', ']', '}', ' ', '\t', '\n', '\r', ':':
			return s.i > start
		}
		s.i++
	}
	return s.i > start
}

// string steps over a string, escapes included.
func (s *jsonSkim) string() bool {
	s.i++ // the opening quote
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '"':
			s.i++
			return true
		case '\\':
			s.i++
		}
		s.i++
	}
	return false
}

// container steps over an array or object and everything in it.
func (s *jsonSkim) container() bool {
	depth := 0
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '"':
			if !s.string() {
				return false
			}
			continue
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				s.i++
				return true
			}
		}
		s.i++
	}
	return false
}
