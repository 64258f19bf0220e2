// Batches (acceptance 3), natural batching of concurrent enqueues, and the
// retry rule: keyed enqueues are resent after transport errors, unkeyed ones
// never.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import type { Interceptor } from "@connectrpc/connect";
import {
  SeppClient,
  SeppError,
  IdempotencyKeyTooLongError,
  UnknownJobTypeError,
  UnavailableError,
  PayloadTooLargeError,
} from "sepp";
import { TestServer } from "./server.js";

function counter(): { interceptor: Interceptor; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    interceptor: (next) => async (req) => {
      calls.push(req.method.name);
      return next(req);
    },
  };
}

let server: TestServer;
let small: TestServer;

before(async () => {
  server = await TestServer.start(`
[server]
max_payload_bytes = 1024

[[queues]]
name = "typed"
job_types = ["charge"]
`);
  small = await TestServer.start(`
[server]
max_batch_size = 10
`);
});

after(async () => {
  await server?.stop();
  await small?.stop();
});

test("a non-atomic batch gives per-item flags and errors, in order", async () => {
  const client = await SeppClient.connect(server.addr);
  const earlier = await client.enqueue({ queue: "typed", jobType: "charge", idempotencyKey: "b-0" });
  const results = await client.enqueueBatch([
    { queue: "typed", jobType: "charge", idempotencyKey: "b-0" }, // a hit on an earlier job
    { queue: "typed", jobType: "charge", idempotencyKey: "b-1" }, // new
    { queue: "typed", jobType: "refund", idempotencyKey: "b-2" }, // not an allowed job type
    { queue: "typed", jobType: "charge", idempotencyKey: "x".repeat(257) }, // too long: refused locally
    { queue: "typed", jobType: "charge", idempotencyKey: "b-1" }, // a hit on item 1 of this batch
    { queue: "typed", jobType: "charge", payload: new Uint8Array(2048) }, // over max_payload_bytes
  ]);
  assert.equal(results.length, 6);
  const [r0, r1, r2, r3, r4, r5] = results;
  assert.ok(r0?.ok && r0.ack.deduplicated && r0.ack.jobId === earlier.jobId);
  assert.ok(r1?.ok && !r1.ack.deduplicated);
  assert.ok(r2 && !r2.ok && r2.error instanceof UnknownJobTypeError, String(r2?.error));
  assert.equal(r2.error.reason, "UNKNOWN_JOB_TYPE");
  assert.ok(r3 && !r3.ok && r3.error instanceof IdempotencyKeyTooLongError);
  assert.ok(r4?.ok && r4.ack.deduplicated && r4.ack.jobId === r1.ack.jobId);
  assert.ok(r5 && !r5.ok && r5.error instanceof PayloadTooLargeError, String(r5?.error));
  assert.equal((await client.lookupIdempotencyKey("typed", "b-2")).found, false);
});

test("an atomic batch with one bad item writes nothing, and names the item", async () => {
  const client = await SeppClient.connect(server.addr);
  const jobs = [
    { queue: "typed", jobType: "charge", idempotencyKey: "a-1" },
    { queue: "typed", jobType: "charge", idempotencyKey: "a-2" },
    { queue: "typed", jobType: "refund", idempotencyKey: "a-3" },
  ];
  await assert.rejects(client.enqueueBatch(jobs, { atomic: true }), (err: unknown) => {
    assert.ok(err instanceof UnknownJobTypeError, String(err));
    assert.equal((err as SeppError).index, 2);
    return true;
  });
  for (const k of ["a-1", "a-2", "a-3"]) assert.equal((await client.lookupIdempotencyKey("typed", k)).found, false, k);
  // A local error in an atomic batch also names its item and sends nothing.
  await assert.rejects(
    client.enqueueBatch([jobs[0]!, { queue: "typed", jobType: "charge", idempotencyKey: "" }], { atomic: true }),
    (err: unknown) => err instanceof SeppError && err.index === 1 && err.reason === "IDEMPOTENCY_KEY_EMPTY",
  );
  assert.equal((await client.lookupIdempotencyKey("typed", "a-1")).found, false);
  // All good: all written together; a dedup hit is not a failure.
  const ok = await client.enqueueBatch([jobs[0]!, jobs[1]!, jobs[0]!], { atomic: true });
  assert.ok(ok.every((r) => r.ok));
  assert.deepEqual(ok.map((r) => r.ack?.deduplicated), [false, false, true]);
  assert.equal(ok[2]!.ack!.jobId, ok[0]!.ack!.jobId);
});

test("concurrent enqueues are coalesced into EnqueueBatch RPCs, each caller getting its own answer", async () => {
  const c = counter();
  const client = await SeppClient.connect(server.addr, { interceptors: [c.interceptor] });
  c.calls.splice(0);
  const n = 300;
  const settled = await Promise.allSettled(
    Array.from({ length: n }, (_, i) =>
      client.enqueue(i % 50 === 7 ? { queue: "typed", jobType: "refund" } : { queue: "nb", jobType: "t", idempotencyKey: `nb-${i}` }),
    ),
  );
  const ok = settled.filter((s) => s.status === "fulfilled");
  const bad = settled.filter((s) => s.status === "rejected");
  assert.equal(bad.length, 6);
  assert.ok(bad.every((s) => s.reason instanceof UnknownJobTypeError));
  assert.equal(new Set(ok.map((s) => s.value.jobId)).size, n - 6);
  assert.ok(c.calls.includes("EnqueueBatch"), JSON.stringify(c.calls));
  assert.ok(c.calls.length < n / 10, `${c.calls.length} RPCs for ${n} enqueues`);
  // The same keys again: all hits, the same ids.
  const again = await Promise.all(Array.from({ length: n }, (_, i) => (i % 50 === 7 ? null : client.enqueue({ queue: "nb", jobType: "t", idempotencyKey: `nb-${i}` }))));
  assert.ok(again.every((a) => a === null || a.deduplicated));

  // Turned off, every enqueue is its own RPC.
  const d = counter();
  const unbatched = await SeppClient.connect(server.addr, { batching: false, interceptors: [d.interceptor] });
  d.calls.splice(0);
  await Promise.all(Array.from({ length: 20 }, (_, i) => unbatched.enqueue({ queue: "nb", jobType: "t", idempotencyKey: `off-${i}` })));
  assert.deepEqual(d.calls, Array(20).fill("Enqueue"));
});

test("coalesced batches follow a server's smaller max_batch_size", async () => {
  const client = await SeppClient.connect(small.addr);
  const acks = await Promise.all(Array.from({ length: 200 }, (_, i) => client.enqueue({ queue: "s", jobType: "t", idempotencyKey: `s-${i}` })));
  assert.equal(new Set(acks.map((a) => a.jobId)).size, 200);
  assert.ok(acks.every((a) => !a.deduplicated));
});

test("a keyed enqueue is resent after a transport error, an unkeyed one is not", async () => {
  const dead = await TestServer.start("");
  const addr = dead.addr;
  await dead.stop(); // nothing listens there now
  for (const batching of [true, false]) {
    const c = counter();
    const client = await SeppClient.connect(addr, {
      healthCheck: false,
      batching,
      retries: { maxRetries: 3 },
      interceptors: [c.interceptor],
    });
    await assert.rejects(client.enqueue({ queue: "q", jobType: "t", idempotencyKey: "k" }), UnavailableError);
    assert.equal(c.calls.length, 4, `keyed, batching ${batching}: ${JSON.stringify(c.calls)}`);
    c.calls.splice(0);
    await assert.rejects(client.enqueue({ queue: "q", jobType: "t" }), UnavailableError);
    assert.equal(c.calls.length, 1, `unkeyed, batching ${batching}`);
    c.calls.splice(0);
    // A batch is resent only when every job has a key.
    await assert.rejects(client.enqueueBatch([{ queue: "q", jobType: "t", idempotencyKey: "k" }]), UnavailableError);
    assert.equal(c.calls.length, 4);
    c.calls.splice(0);
    await assert.rejects(client.enqueueBatch([{ queue: "q", jobType: "t", idempotencyKey: "k" }, { queue: "q", jobType: "t" }]), UnavailableError);
    assert.equal(c.calls.length, 1);
  }
  // Concurrent callers in one coalesced batch: the keyed ones are resent,
  // the unkeyed ones get the error at once.
  const c = counter();
  const client = await SeppClient.connect(addr, {
    healthCheck: false,
    retries: { maxRetries: 2 },
    interceptors: [c.interceptor],
  });
  const settled = await Promise.allSettled(
    Array.from({ length: 10 }, (_, i) => client.enqueue({ queue: "q", jobType: "t", idempotencyKey: i % 2 ? `k${i}` : undefined })),
  );
  assert.ok(settled.every((s) => s.status === "rejected" && s.reason instanceof UnavailableError));
});

test("an aborted enqueue rejects with the abort reason", async () => {
  const client = await SeppClient.connect(server.addr);
  const ac = new AbortController();
  ac.abort(new Error("caller gave up"));
  await assert.rejects(client.enqueue({ queue: "q", jobType: "t", idempotencyKey: "ab" }, { signal: ac.signal }), /caller gave up/);
});
