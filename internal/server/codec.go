package server

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// strictJSON is the Connect JSON codec with two changes from connect-go's
// default: an unknown field is an error, not silently dropped (a misspelled
// "idempotencykey" must not turn a keyed enqueue into an unkeyed one), and
// false, zero and empty values are written out, so a first enqueue answers
// "deduplicated": false rather than leaving the field out.
type strictJSON struct{}

func (strictJSON) Name() string { return "json" }

func (strictJSON) Marshal(m any) ([]byte, error) {
	msg, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("json codec: %T is not a proto.Message", m)
	}
	return protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(msg)
}

func (strictJSON) Unmarshal(data []byte, m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("json codec: %T is not a proto.Message", m)
	}
	// An error is the interceptor's to answer, as INVALID_FIELD (decode.go).
	if len(data) == 0 {
		decodeFailed(msg, errors.New("empty body: send a JSON object, e.g. {}"))
		return nil
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, msg); err != nil {
		decodeFailed(msg, fmt.Errorf("%w (field names are lowerCamelCase, e.g. jobType, idempotencyKey)", err))
	}
	return nil
}
