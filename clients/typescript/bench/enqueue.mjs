// Throughput of keyed enqueues through the TypeScript client: n enqueues with
// unique keys and 256-byte payloads to queue "bench", from c concurrent
// callers in this one process, coalesced by the client's natural batching.
//
//   node bench/enqueue.mjs --addr http://127.0.0.1:50051 -n 100000 -c 32
//
// Prints one JSON line:
// {"client":"typescript","n":100000,"c":32,"seconds":..,"jobs_per_sec":..}
import { parseArgs } from "node:util";
import { randomBytes } from "node:crypto";
import { SeppClient } from "sepp";

const { values } = parseArgs({
  options: {
    addr: { type: "string", default: "http://127.0.0.1:50051" },
    n: { type: "string", short: "n", default: "100000" },
    c: { type: "string", short: "c", default: "32" },
    payload: { type: "string", default: "256" },
    queue: { type: "string", default: "bench" },
    protocol: { type: "string", default: "grpc" },
    batching: { type: "boolean", default: true },
    "no-batching": { type: "boolean", default: false },
  },
});
const n = Number(values.n);
const c = Number(values.c);
const payload = randomBytes(Number(values.payload));
const client = await SeppClient.connect(values.addr, {
  protocol: values.protocol,
  batching: !values["no-batching"],
});
const run = `${Date.now().toString(36)}-${process.pid}`;
let next = 0;
const start = performance.now();
await Promise.all(
  Array.from({ length: c }, async () => {
    for (let i = next++; i < n; i = next++) {
      await client.enqueue({ queue: values.queue, jobType: "bench", payload, idempotencyKey: `bench-${run}-${i}` });
    }
  }),
);
const seconds = (performance.now() - start) / 1000;
console.log(
  JSON.stringify({ client: "typescript", n, c, seconds: Number(seconds.toFixed(3)), jobs_per_sec: Math.round(n / seconds) }),
);
