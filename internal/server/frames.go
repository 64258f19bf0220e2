package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// The body of a unary gRPC or gRPC-Web call is exactly one length-prefixed
// message: a flag byte (0, or 1 for a message compressed with the call's
// grpc-encoding), the message's length in 4 bytes, big-endian, and the
// message. Both stacks check this before any Sepp code runs, and answer a
// body that breaks it (cut short, empty, two messages, the compressed flag
// without a grpc-encoding) with INTERNAL (grpc-go) or INTERNAL and
// UNIMPLEMENTED (connect-go), which clients read as a server bug. So Sepp
// reads the frames first, with readUnary, and answers such a body as it
// answers a message that does not decode (decode.go): INVALID_FIELD
// "request". On grpc-go, Sepp's unary methods are stream handlers that read
// the frames themselves (framedRegistrar); in front of connect-go, which
// serves gRPC-Web and gRPC over HTTP/1.1, checkFrames reads the body and
// hands it on.

// requestFrames is a request body read frame by frame.
type requestFrames interface {
	// prefix fills p with the next frame's prefix. io.EOF: the body ended
	// before it; io.ErrUnexpectedEOF: within it.
	prefix(p []byte) error
	// message reads a frame's n-byte message. io.EOF or
	// io.ErrUnexpectedEOF: the body ended before its end.
	message(n int) ([]byte, error)
}

// framePrefixBytes is the length of a frame's prefix.
const framePrefixBytes = 5

// flagCompressed is the flag of a compressed message.
const flagCompressed = 1

// readUnary reads the one message of a unary call's body, refusing with an
// *apiError a body that is not one well-framed message, or whose message is
// over limit, from its length prefix, before reading it; other errors are
// the transport's (the client went away). encoding is the call's
// grpc-encoding header; compressed reports whether the message is
// compressed with it.
func readUnary(body requestFrames, encoding string, limit requestLimit) (msg []byte, compressed bool, err error) {
	var p [framePrefixBytes]byte
	switch err := body.prefix(p[:]); {
	case errors.Is(err, io.EOF):
		return nil, false, framingError("the body holds no message, and a unary call sends exactly one: an empty message is the 5 bytes 00 00 00 00 00")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, false, framingError("the body ends inside the 5-byte prefix of its message: send the flag byte, the message's length in 4 bytes (big-endian), then the message")
	case err != nil:
		return nil, false, err
	}
	flag, n := p[0], binary.BigEndian.Uint32(p[1:])
	switch {
	case flag&^flagCompressed != 0:
		return nil, false, framingError("the message's flag byte is 0x%02x: a request message's flag is 0, or 1 when it is compressed", flag)
	case flag == flagCompressed && (encoding == "" || encoding == "identity"):
		return nil, false, framingError("the message's compressed flag is set, but the call names no grpc-encoding: name the compression in the grpc-encoding header, or send the message uncompressed with the flag 0")
	case int64(n) > limit.max:
		return nil, false, limit.refuse("message", strconv.FormatUint(uint64(n), 10))
	}
	msg, err = body.message(int(n))
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, false, framingError("the body ends inside its message: the prefix announces %d bytes, and fewer came; send the whole message, with its length in the prefix", n)
	case err != nil:
		return nil, false, err
	}
	switch err := body.prefix(p[:]); {
	case err == nil || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, false, framingError("the body goes on after its message, and a unary call sends exactly one: send one message, with its length in the prefix")
	case !errors.Is(err, io.EOF):
		return nil, false, err
	}
	return msg, flag == flagCompressed, nil
}

func framingError(format string, args ...any) *apiError {
	return invalidField("request", format, args...)
}

// grpcStream is what grpc-go offers, on the stream of a call
// (grpc.ServerTransportStreamFromContext), to read the request frame by
// frame: the methods of its internal transport stream that its own reading
// uses. The type is grpc-go's own; TestGRPCMalformedFrames fails if a
// release of grpc-go takes the methods away.
type grpcStream interface {
	ReadMessageHeader(header []byte) error
	Read(n int) (mem.BufferSlice, error)
	RecvCompress() string
	// ContentSubtype is the call's codec: "" or "proto" for protobuf,
	// "json", or what else follows "application/grpc+", in lower case.
	ContentSubtype() string
}

// grpcFrames reads a grpcStream. The message it reads is in a buffer of
// grpc-go's pool until free.
type grpcFrames struct {
	grpcStream
	msg mem.Buffer
}

func (f *grpcFrames) prefix(p []byte) error { return f.ReadMessageHeader(p) }

func (f *grpcFrames) message(n int) ([]byte, error) {
	data, err := f.Read(n)
	if err != nil {
		return nil, err
	}
	defer data.Free()
	// Into one pooled buffer, as grpc-go's codec puts it: a new slice for
	// each message cost a 260 KB Enqueue 0.15 ms more than grpc-go's own
	// reading, in allocating and clearing it (BenchmarkGRPCUnary).
	f.msg = data.MaterializeToBuffer(mem.DefaultBufferPool())
	return f.msg.ReadOnlyData(), nil
}

// free gives the message's buffer back to the pool.
func (f *grpcFrames) free() {
	if f.msg != nil {
		f.msg.Free()
		f.msg = nil
	}
}

// framedRegistrar registers services on grpc-go with their unary methods
// as stream handlers that read the request with readUnary, then run as
// grpc-go runs a unary method, with interceptor.
type framedRegistrar struct {
	grpc        *grpc.Server
	codec       grpcCodec
	limits      requestLimits
	interceptor grpc.UnaryServerInterceptor
}

func (r framedRegistrar) RegisterService(sd *grpc.ServiceDesc, impl any) {
	framed := *sd
	framed.Methods = nil
	framed.Streams = append([]grpc.StreamDesc(nil), sd.Streams...)
	for _, m := range sd.Methods {
		procedure := "/" + sd.ServiceName + "/" + m.MethodName
		framed.Streams = append(framed.Streams, grpc.StreamDesc{StreamName: m.MethodName, Handler: r.unary(procedure, m.Handler)})
	}
	r.grpc.RegisterService(&framed, impl)
}

func (r framedRegistrar) unary(procedure string, handler grpc.MethodHandler) grpc.StreamHandler {
	return func(srv any, ss grpc.ServerStream) error {
		ctx := ss.Context()
		dec, inJSON, free, err := r.request(ctx, procedure, ss)
		if err != nil {
			return err
		}
		defer free()
		res, err := handler(srv, ctx, dec, r.interceptor)
		if err != nil {
			return err
		}
		if inJSON {
			// grpc-go labels the answer with the call's content type.
			return ss.SendMsg(jsonReply{res})
		}
		return ss.SendMsg(res)
	}
}

// request reads the request of a unary call and returns the function that
// decodes it, whether the call is in JSON (application/grpc+json), as its
// answer must be, and free, which the caller calls once it decoded the
// request. grpc-go decodes any other content type as protobuf and labels
// the protobuf answer with it, so a call in another codec is refused.
func (r framedRegistrar) request(ctx context.Context, procedure string, ss grpc.ServerStream) (dec func(any) error, inJSON bool, free func(), err error) {
	st, ok := grpc.ServerTransportStreamFromContext(ctx).(grpcStream)
	if !ok {
		return ss.RecvMsg, false, func() {}, nil // grpc-go reads it, with its own answers
	}
	switch sub := st.ContentSubtype(); sub {
	case "", "proto":
	case "json":
		inJSON = true
	default:
		aerr := invalidField("content-type", "application/grpc+%s names a codec this server does not speak: send protobuf (application/grpc or application/grpc+proto) or JSON (application/grpc+json)", sub)
		return nil, false, nil, grpcError(aerr)
	}
	frames := &grpcFrames{grpcStream: st}
	msg, err := r.readMessage(frames, r.limits.of(procedure, inJSON))
	if err != nil {
		frames.free()
		return nil, false, nil, err
	}
	if inJSON {
		return func(v any) error { return strictJSON{r.codec.counts}.Unmarshal(msg, v) }, true, frames.free, nil
	}
	return func(v any) error { return r.codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, v) }, false, frames.free, nil
}

// readMessage reads the one message of st, within limit, decompressed.
func (r framedRegistrar) readMessage(st *grpcFrames, limit requestLimit) ([]byte, error) {
	msg, compressed, err := readUnary(st, st.RecvCompress(), limit)
	var aerr *apiError
	if errors.As(err, &aerr) {
		return nil, grpcError(aerr)
	}
	if err != nil {
		return nil, err
	}
	if compressed {
		// grpc-go has refused the call already unless a compressor of
		// this name is registered.
		if msg, err = decompress(encoding.GetCompressor(st.RecvCompress()), msg, r.limits.any.max); err != nil {
			return nil, grpcError(err)
		}
	}
	return msg, nil
}

// decompress decompresses msg with c, up to max bytes.
func decompress(c encoding.Compressor, msg []byte, max int64) ([]byte, error) {
	if c == nil {
		return nil, framingError("the message is compressed with a grpc-encoding this server does not know: send it uncompressed")
	}
	zr, err := c.Decompress(bytes.NewReader(msg))
	if err != nil {
		return nil, framingError("the compressed message does not decompress: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, max+1))
	switch {
	case err != nil:
		return nil, framingError("the compressed message does not decompress: %v", err)
	case int64(len(out)) > max:
		return nil, limitExceeded("max_request_bytes", max,
			"the request message is over %d bytes decompressed; the limit is %d (limits.max_request_bytes, derived from max_payload_bytes and max_batch_size unless set): send smaller requests, or split the batch", max, max)
	}
	return out, nil
}

// checkFrames reads the body of a gRPC or gRPC-Web call to one of Sepp's
// services with readUnary, answers a body readUnary refuses, and hands the
// others on to next (connect-go) with the body as it came.
func (s *Server) checkFrames(next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if !guarded(r.URL.Path) || !framedContentType(ct) || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body := &bodyFrames{r: r.Body}
		_, _, err := readUnary(body, r.Header.Get("Grpc-Encoding"), s.requestLimits.of(r.URL.Path, jsonContentType(ct)))
		var aerr *apiError
		switch {
		case errors.As(err, &aerr) && aerr.reason == ReasonLimitExceeded:
			// Refused from its length prefix: the message is not read.
			answerUnread(w, r, func() { _ = ew.Write(w, r, connectError(aerr)) })
			return
		case errors.As(err, &aerr):
			_ = ew.Write(w, r, connectError(aerr))
			return
		}
		// After a transport error next meets it again, after the bytes
		// read.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(&body.read, r.Body), r.Body}
		next.ServeHTTP(w, r)
	})
}

// framedContentType reports whether ct is gRPC or gRPC-Web in a codec that
// connect-go serves (protobuf or JSON; connect-go answers the others with
// 415 Unsupported Media Type).
func framedContentType(ct string) bool {
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	if !ok {
		return false
	}
	rest = strings.TrimPrefix(rest, "-web")
	rest, _, _ = strings.Cut(rest, ";")
	switch strings.TrimSpace(rest) {
	case "", "+proto", "+json":
		return true
	}
	return false
}

// jsonContentType reports whether ct is a JSON codec's: Connect's
// application/json, gRPC-Web's application/grpc-web+json.
func jsonContentType(ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.HasSuffix(strings.TrimSpace(strings.ToLower(ct)), "json")
}

// bodyFrames reads an HTTP request body, keeping what it read.
type bodyFrames struct {
	r    io.Reader
	read bytes.Buffer
}

func (b *bodyFrames) prefix(p []byte) error {
	n, err := io.ReadFull(b.r, p)
	b.read.Write(p[:n])
	return err
}

// message returns the message, which is valid until the next read.
func (b *bodyFrames) message(n int) ([]byte, error) {
	start := b.read.Len()
	// Copied as it arrives: a prefix that announces more than comes
	// costs no more memory than what came.
	if _, err := io.CopyN(&b.read, b.r, int64(n)); err != nil {
		return nil, err
	}
	return b.read.Bytes()[start:], nil
}
