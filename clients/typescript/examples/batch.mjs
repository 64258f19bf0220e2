// Batch enqueue: one RPC, one result per job, in order. A non-atomic batch
// judges each job alone; an atomic one writes all jobs or none.
//
//   node examples/batch.mjs [http://127.0.0.1:50051]
import { SeppClient, SeppError } from "sepp";

const client = await SeppClient.connect(process.argv[2] ?? "http://127.0.0.1:50051");
const run = Date.now().toString(36);

const results = await client.enqueueBatch([
  { queue: "emails", jobType: "receipt", idempotencyKey: `receipt-${run}-1` },
  { queue: "emails", jobType: "receipt", idempotencyKey: `receipt-${run}-1` }, // a hit on the first
  { queue: "emails", jobType: "receipt", idempotencyKey: "x".repeat(300) }, // too long: this item fails
]);
for (const [i, r] of results.entries()) {
  console.log(r.ok ? `job ${i}: ${r.ack.jobId} deduplicated=${r.ack.deduplicated}` : `job ${i}: ${r.error.reason}`);
}

try {
  await client.enqueueBatch(
    [
      { queue: "emails", jobType: "receipt", idempotencyKey: `receipt-${run}-2` },
      { queue: "emails", jobType: "receipt", idempotencyKey: "" }, // an empty key is an error
    ],
    { atomic: true },
  );
} catch (err) {
  if (!(err instanceof SeppError)) throw err;
  const look = await client.lookupIdempotencyKey("emails", `receipt-${run}-2`);
  console.log(`atomic batch refused: ${err.reason} at job ${err.index}; job 0 written: ${look.found}`);
}
