package server

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// A request that does not decode (invalid wire format, a truncated message,
// invalid UTF-8 in a string field, bad JSON) is INVALID_FIELD, with the
// server's ErrorInfo, on both stacks. Neither stack lets a codec choose the
// error: grpc-go answers a codec error with Internal, connect-go with a bare
// InvalidArgument. So the codecs below do not fail: they empty the message
// and leave the decoding error in it as an unknown field (decodeFailed),
// and the interceptors, which see the message before any handler, answer
// with the error (decodeError).

// markField is the field number of the mark: the largest protobuf
// allows, never used by a Sepp message. The mark holds the error as a
// BatchItemError.
const markField protowire.Number = protowire.MaxValidNumber

// decodeFailed empties m and marks it with the INVALID_FIELD error of err.
func decodeFailed(m proto.Message, err error) {
	refusedBeforeDecode(m, invalidField("request", "cannot decode the %s message: %s", m.ProtoReflect().Descriptor().FullName(), err))
}

// refusedBeforeDecode empties m and marks it with e: a request refused
// before it was decoded (counts.go), or one that did not decode.
func refusedBeforeDecode(m proto.Message, e *apiError) {
	proto.Reset(m)
	b, _ := proto.Marshal(&seppv1.BatchItemError{Code: e.code.String(), Reason: e.reason, Message: e.msg, Metadata: e.metadata})
	mark := protowire.AppendTag(nil, markField, protowire.BytesType)
	m.ProtoReflect().SetUnknown(protowire.AppendBytes(mark, b))
}

// decodeError is the error a codec marked m with (decodeFailed,
// refusedBeforeDecode), or nil.
func decodeError(req any) *apiError {
	m, ok := req.(proto.Message)
	if !ok || m == nil {
		return nil
	}
	u := m.ProtoReflect().GetUnknown()
	if len(u) == 0 {
		return nil
	}
	num, typ, n := protowire.ConsumeTag(u)
	if n < 0 || num != markField || typ != protowire.BytesType {
		return nil
	}
	text, k := protowire.ConsumeBytes(u[n:])
	if k < 0 {
		return nil
	}
	return refusal(text)
}

// refusal is the error of a mark. A client can send the mark itself, and
// gets the answer it wrote only if it is one a codec gives.
func refusal(mark []byte) *apiError {
	var e seppv1.BatchItemError
	if proto.Unmarshal(mark, &e) != nil {
		return nil
	}
	switch e.GetReason() {
	case ReasonLimitExceeded, ReasonBatchTooLarge, ReasonInvalidField:
		return &apiError{code: codeOf(e.GetCode()), reason: e.GetReason(), msg: e.GetMessage(), metadata: e.GetMetadata()}
	}
	return nil
}

// grpcCodec is grpc-go's proto codec with decodeFailed for errors
// (grpc.ForceServerCodecV2), and the bounds on lists checked before it
// decodes (counts.go). It writes a jsonReply in JSON.
type grpcCodec struct {
	encoding.CodecV2
	counts *beforeDecode
}

func newGRPCCodec(counts *beforeDecode) grpcCodec {
	return grpcCodec{encoding.GetCodecV2(grpcproto.Name), counts}
}

// jsonReply is the answer to a gRPC call in JSON (application/grpc+json),
// for grpcCodec to write as strictJSON does. grpc-go picks no codec by the
// call's content type once one is forced, so the handler says which.
type jsonReply struct{ msg any }

func (c grpcCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(jsonReply); ok {
		b, err := strictJSON{}.Marshal(r.msg)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.CodecV2.Marshal(v)
}

func (c grpcCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(proto.Message); ok && c.counts != nil {
		var raw []byte
		if len(data) == 1 {
			raw = data[0].ReadOnlyData()
		} else {
			raw = data.Materialize()
		}
		if aerr := c.counts.check(m, raw, false); aerr != nil {
			refusedBeforeDecode(m, aerr)
			return nil
		}
	}
	err := c.CodecV2.Unmarshal(data, v)
	if m, ok := v.(proto.Message); ok && err != nil {
		decodeFailed(m, err)
		return nil
	}
	return err
}

// decodeErrorsStream answers a streaming call's undecodable message (gRPC
// health Watch, reflection) as the unary interceptor does.
func decodeErrorsStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, decodeCheckedStream{ss})
}

type decodeCheckedStream struct{ grpc.ServerStream }

func (s decodeCheckedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if aerr := decodeError(m); aerr != nil {
		return grpcError(aerr)
	}
	return nil
}

// connectProto is connect-go's binary codec with decodeFailed for errors,
// and the bounds on lists checked before it decodes (counts.go).
type connectProto struct{ counts *beforeDecode }

func (connectProto) Name() string { return "proto" }

func (connectProto) Marshal(m any) ([]byte, error) {
	msg, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto codec: %T is not a proto.Message", m)
	}
	return proto.Marshal(msg)
}

func (c connectProto) Unmarshal(data []byte, m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("proto codec: %T is not a proto.Message", m)
	}
	if aerr := c.counts.check(msg, data, false); aerr != nil {
		refusedBeforeDecode(msg, aerr)
		return nil
	}
	if err := proto.Unmarshal(data, msg); err != nil {
		decodeFailed(msg, err)
	}
	return nil
}
