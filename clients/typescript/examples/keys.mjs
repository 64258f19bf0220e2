// Was this already enqueued, and what became of it? Look a key up without
// enqueueing; release it to let the next enqueue create a new job.
//
//   node examples/keys.mjs [http://127.0.0.1:50051]
import { SeppClient } from "sepp";

const client = await SeppClient.connect(process.argv[2] ?? "http://127.0.0.1:50051");
const key = `invoice-${Date.now().toString(36)}`;

const ack = await client.enqueue({ queue: "billing", jobType: "invoice", idempotencyKey: key });
await client.enqueue({ queue: "billing", jobType: "invoice", idempotencyKey: key }); // a hit

const look = await client.lookupIdempotencyKey("billing", key);
console.log(`found=${look.found} job=${look.jobId === ack.jobId ? "the original" : look.jobId} hits=${look.hits} state=${look.state}`);

const job = await client.cancelJob(ack.jobId);
console.log(`cancelled: state=${job.state}`);

const released = await client.releaseIdempotencyKey("billing", key);
const again = await client.enqueue({ queue: "billing", jobType: "invoice", idempotencyKey: key });
console.log(`released=${released.released}; the next enqueue is a new job: ${again.jobId !== ack.jobId && !again.deduplicated}`);
