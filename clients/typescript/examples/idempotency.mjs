import { SeppClient } from "sepp";

const client = await SeppClient.connect("http://localhost:50051");

// Derive the key from what the job is "about", so a retry of the same
// logical enqueue carries the same key.
const ack = await client.enqueue({
  queue: "emails",
  jobType: "receipt",
  idempotencyKey: "receipt-order-8a3f",
});

if (ack.deduplicated) {
  console.log(`already enqueued earlier as ${ack.jobId}`);
} else {
  console.log(`enqueued ${ack.jobId}`);
}
