package sepp_test

import (
	"errors"
	"fmt"

	"github.com/sepp-dev/sepp"
)

// A queue with key_fields = ["/account", "/amount"] derives a job's key from
// those two fields; DeriveKey computes the same key on the client, whatever
// the order of the members and the spelling of the numbers.
func ExampleDeriveKey() {
	key, err := sepp.DeriveKey([]byte(`{"amount": 100, "account": "acc-123", "note": "first try"}`), "/account", "/amount")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(key)

	retry, _ := sepp.DeriveKey([]byte(`{"account":"acc-123","note":"second try","amount":1.00e2}`), "/account", "/amount")
	fmt.Println(retry == key)

	_, err = sepp.DeriveKey([]byte(`{"account": "acc-123"}`), "/account", "/amount")
	fmt.Println(errors.Is(err, sepp.ErrInvalidField))
	fmt.Println(err)
	// Output:
	// ["acc-123",100]
	// true
	// true
	// sepp: INVALID_FIELD: field "/amount": not in the payload; the queue derives its idempotency key from key_fields ["/account","/amount"], so every job needs them, or send an explicit key
}
