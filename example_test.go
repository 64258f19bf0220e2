package sepp_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/sepp-dev/sepp"
)

// The README's first example: derive the key from what the job is about, so
// a retry of the same logical enqueue carries the same key.
func Example() {
	ctx := context.Background()
	client, err := sepp.Connect(ctx, exampleServerURL) // e.g. "http://localhost:50051"
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	request := sepp.EnqueueRequest{
		Queue:          "emails",
		JobType:        "receipt",
		IdempotencyKey: sepp.Key("receipt-order-8a3f"),
	}
	for range 2 { // the second call is the retry
		ack, err := client.Enqueue(ctx, request)
		if err != nil {
			log.Fatal(err)
		}
		if ack.Deduplicated {
			fmt.Println("already enqueued earlier as", shortID(ack.JobID))
		} else {
			fmt.Println("enqueued", shortID(ack.JobID))
		}
	}
	// Output:
	// enqueued job-1
	// already enqueued earlier as job-1
}

// Errors carry a stable reason; compare them with errors.Is.
func ExampleClient_Enqueue_keyTooLong() {
	ctx := context.Background()
	client, err := sepp.Connect(ctx, exampleServerURL)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	_, err = client.Enqueue(ctx, sepp.EnqueueRequest{
		Queue: "emails", JobType: "receipt", IdempotencyKey: sepp.Key(strings.Repeat("x", 300)),
	})
	fmt.Println(errors.Is(err, sepp.ErrIdempotencyKeyTooLong))
	fmt.Println(err)
	// Output:
	// true
	// sepp: IDEMPOTENCY_KEY_TOO_LONG: idempotency key is 300 bytes; the limit is 256 (max_idempotency_key_bytes): use a shorter, stable id such as the entity or event id
}

// A key that is set but empty is refused, not sent as "no key": an empty key
// is almost always a variable that was never filled in.
func ExampleKey_empty() {
	ctx := context.Background()
	client, err := sepp.Connect(ctx, exampleServerURL)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	orderID := "" // say, os.Getenv("ORDER_ID") with the variable unset
	_, err = client.Enqueue(ctx, sepp.EnqueueRequest{
		Queue: "emails", JobType: "receipt", IdempotencyKey: sepp.Key(orderID),
	})
	fmt.Println(errors.Is(err, sepp.ErrIdempotencyKeyEmpty))
	// Output:
	// true
}

// A batch reports one result per job, each with its own flag or error.
func ExampleClient_EnqueueBatch() {
	ctx := context.Background()
	client, err := sepp.Connect(ctx, exampleServerURL)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	results, err := client.EnqueueBatch(ctx, []sepp.EnqueueRequest{
		{Queue: "invoices", JobType: "send", IdempotencyKey: sepp.Key("invoice-17")},
		{Queue: "invoices", JobType: "send", IdempotencyKey: sepp.Key("invoice-17")}, // same key: a hit on the first
		{Queue: "invoices", JobType: "send"},                                         // no key: always a new job
	}, sepp.BatchOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range results {
		fmt.Printf("job %d: deduplicated=%v\n", i, r.Ack.Deduplicated)
	}
	fmt.Println("same job:", results[0].Ack.JobID == results[1].Ack.JobID)
	// Output:
	// job 0: deduplicated=false
	// job 1: deduplicated=true
	// job 2: deduplicated=false
	// same job: true
}

// LookupIdempotencyKey answers "was this already enqueued?" without
// enqueueing.
func ExampleClient_LookupIdempotencyKey() {
	ctx := context.Background()
	client, err := sepp.Connect(ctx, exampleServerURL)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	l, err := client.LookupIdempotencyKey(ctx, "payments", "charge-order-77")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("found:", l.Found)

	if _, err := client.Enqueue(ctx, sepp.EnqueueRequest{Queue: "payments", JobType: "charge", IdempotencyKey: sepp.Key("charge-order-77")}); err != nil {
		log.Fatal(err)
	}
	l, err = client.LookupIdempotencyKey(ctx, "payments", "charge-order-77")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("found:", l.Found, "state:", l.State, "hits:", l.Hits)
	// Output:
	// found: false
	// found: true state: available hits: 0
}
