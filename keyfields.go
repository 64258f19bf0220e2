package sepp

import (
	"errors"

	"github.com/sepp-dev/sepp/internal/jsonkey"
)

// DeriveKey returns the idempotency key that a queue with key_fields =
// fields derives from payload, the same key the server gives a job enqueued
// without one: the canonical JSON (RFC 8785) of the array of the values the
// JSON pointers (RFC 6901) name, such as ["acc-123",100] for
// {"amount": 100, "account": "acc-123"} and "/account", "/amount". Use it to
// look a job up by its derived key (Client.LookupIdempotencyKey), or to send the key
// explicitly.
//
// The payload must be a JSON object that is I-JSON (no duplicate member
// names, valid UTF-8, no lone surrogates), and every pointer must name a
// member or array element of it. Numbers count as IEEE-754 doubles, as in
// RFC 8785: 100, 100.0 and 1e2 give the same key, and integers beyond 2^53
// are rounded (send those as strings). The error, if any, is an *Error with
// Reason "INVALID_FIELD" (errors.Is(err, ErrInvalidField)), the message the
// server would give, and Metadata["pointer"] naming the field at fault, ""
// when the payload itself is.
func DeriveKey(payload []byte, fields ...string) (string, error) {
	key, err := jsonkey.Derive(payload, fields)
	if err != nil {
		var fe *jsonkey.FieldError
		if !errors.As(err, &fe) {
			return "", err
		}
		return "", &Error{
			Code:     "invalid_argument",
			Reason:   ErrInvalidField.Error(),
			Message:  fe.Error(),
			Index:    -1,
			Metadata: map[string]string{"pointer": fe.Pointer},
		}
	}
	return key, nil
}
