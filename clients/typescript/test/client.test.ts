// The producer API against a real server: local key checks (acceptance 2),
// typed errors for the server's reasons, every enqueue field, get, cancel,
// lookup, release, and the bearer token.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import type { Interceptor } from "@connectrpc/connect";
import { ConnectError, Code } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  SeppClient,
  SeppError,
  IdempotencyKeyTooLongError,
  IdempotencyKeyEmptyError,
  IdempotencyKeyConflictError,
  UnknownQueueError,
  UnknownJobTypeError,
  JobNotFoundError,
  InvalidFieldError,
  Reason,
  bytesToText,
} from "sepp";
import { TestServer } from "./server.js";

/** Counts the RPCs a client sends, by method name. */
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
let strict: TestServer;

before(async () => {
  server = await TestServer.start(`
[[queues]]
name = "strictpay"
key_reuse = "reject_mismatch"

[[queues]]
name = "typed"
job_types = ["charge"]

[[queues]]
name = "transfers"
key_fields = ["/account", "/amount"]
`);
  strict = await TestServer.start(`
[server]
strict = true

[[queues]]
name = "emails"
`);
});

after(async () => {
  await server?.stop();
  await strict?.stop();
});

test("a 257-byte key fails locally with the too-long error and sends nothing", async () => {
  const c = counter();
  const client = await SeppClient.connect(server.addr, { interceptors: [c.interceptor] });
  const before = c.calls.length; // the health check
  const key = "k".repeat(257);
  await assert.rejects(client.enqueue({ queue: "q", jobType: "t", idempotencyKey: key }), (err: unknown) => {
    assert.ok(err instanceof IdempotencyKeyTooLongError);
    assert.ok(err instanceof SeppError);
    assert.ok(err instanceof ConnectError);
    assert.equal(err.reason, "IDEMPOTENCY_KEY_TOO_LONG");
    assert.equal(err.code, Code.InvalidArgument);
    assert.match(err.rawMessage, /257 bytes; the limit is 256/);
    return true;
  });
  await assert.rejects(client.enqueueBatch([{ queue: "q", jobType: "t", idempotencyKey: key }], { atomic: true }), IdempotencyKeyTooLongError);
  await assert.rejects(client.lookupIdempotencyKey("q", key), IdempotencyKeyTooLongError);
  await assert.rejects(client.releaseIdempotencyKey("q", key), IdempotencyKeyTooLongError);
  assert.deepEqual(c.calls.slice(before), [], "nothing was sent");
});

test("a 129-character key of two-byte characters is 258 bytes: too long, counted in bytes", async () => {
  const c = counter();
  const client = await SeppClient.connect(server.addr, { interceptors: [c.interceptor] });
  const before = c.calls.length;
  const key = "é".repeat(129);
  assert.equal(key.length, 129);
  await assert.rejects(client.enqueue({ queue: "q", jobType: "t", idempotencyKey: key }), (err: unknown) => {
    assert.ok(err instanceof IdempotencyKeyTooLongError);
    assert.match((err as SeppError).rawMessage, /258 bytes/);
    return true;
  });
  assert.deepEqual(c.calls.slice(before), []);
  // 128 of them are 256 bytes: accepted, by the server too.
  const ack = await client.enqueue({ queue: "q", jobType: "t", idempotencyKey: "é".repeat(128) });
  assert.equal(ack.deduplicated, false);
  // So is a 256-byte ASCII key, and any character: colon, slash, NUL, emoji.
  for (const k of ["k".repeat(256), "order-9:invoice", "a/b c\u0000d", "🧾-9"]) {
    const a = await client.enqueue({ queue: "q", jobType: "t", idempotencyKey: k });
    const b = await client.enqueue({ queue: "q", jobType: "t", idempotencyKey: k });
    assert.deepEqual([b.jobId, b.deduplicated], [a.jobId, true], `key ${JSON.stringify(k)}`);
  }
});

test("the server's own check gives the same typed error when local checks are off", async () => {
  const client = await SeppClient.connect(server.addr, { checkKeys: false });
  await assert.rejects(client.enqueue({ queue: "q", jobType: "t", idempotencyKey: "é".repeat(129) }), (err: unknown) => {
    assert.ok(err instanceof IdempotencyKeyTooLongError);
    assert.match((err as SeppError).rawMessage, /258 bytes; the limit is 256/);
    return true;
  });
});

test("an empty key is an error, never 'no key': locally, and sent as \"\" when checks are off", async () => {
  const c = counter();
  const client = await SeppClient.connect(server.addr, { interceptors: [c.interceptor] });
  const before = c.calls.length;
  await assert.rejects(client.enqueue({ queue: "q", jobType: "t", idempotencyKey: "" }), IdempotencyKeyEmptyError);
  assert.deepEqual(c.calls.slice(before), []);
  const unchecked = await SeppClient.connect(server.addr, { checkKeys: false });
  await assert.rejects(unchecked.enqueue({ queue: "q", jobType: "t", idempotencyKey: "" }), (err: unknown) => {
    assert.ok(err instanceof IdempotencyKeyEmptyError, String(err));
    assert.equal((err as SeppError).reason, Reason.IdempotencyKeyEmpty);
    return true;
  });
  // undefined and null are "no key": two enqueues, two jobs.
  const a = await client.enqueue({ queue: "q", jobType: "t", idempotencyKey: undefined });
  const b = await client.enqueue({ queue: "q", jobType: "t", idempotencyKey: null });
  assert.notEqual(a.jobId, b.jobId);
});

test("UNKNOWN_QUEUE from a strict server is an UnknownQueueError", async () => {
  const client = await SeppClient.connect(strict.addr);
  await assert.rejects(client.enqueue({ queue: "nope", jobType: "t", idempotencyKey: "k" }), (err: unknown) => {
    assert.ok(err instanceof UnknownQueueError, String(err));
    assert.equal((err as SeppError).reason, "UNKNOWN_QUEUE");
    assert.equal((err as SeppError).code, Code.NotFound);
    assert.ok(!(err instanceof IdempotencyKeyTooLongError));
    return true;
  });
  const ack = await client.enqueue({ queue: "emails", jobType: "t" });
  assert.ok(ack.jobId);
});

test("IDEMPOTENCY_KEY_CONFLICT from a reject_mismatch queue is an IdempotencyKeyConflictError", async () => {
  const client = await SeppClient.connect(server.addr);
  const first = await client.enqueue({ queue: "strictpay", jobType: "charge", payload: "100", idempotencyKey: "pay-1" });
  const same = await client.enqueue({ queue: "strictpay", jobType: "charge", payload: "100", idempotencyKey: "pay-1" });
  assert.deepEqual([same.jobId, same.deduplicated, same.payloadMismatch], [first.jobId, true, false]);
  await assert.rejects(
    client.enqueue({ queue: "strictpay", jobType: "charge", payload: "200", idempotencyKey: "pay-1" }),
    (err: unknown) => err instanceof IdempotencyKeyConflictError && err.code === Code.AlreadyExists,
  );
  // The default policy returns the original and says the payload differs.
  await client.enqueue({ queue: "lenient", jobType: "charge", payload: "100", idempotencyKey: "pay-1" });
  const hit = await client.enqueue({ queue: "lenient", jobType: "charge", payload: "200", idempotencyKey: "pay-1" });
  assert.deepEqual([hit.deduplicated, hit.payloadMismatch], [true, true]);
  assert.ok(hit.originalEnqueuedAt instanceof Date);
  // Batching on or off, the error is the same.
  const unbatched = await SeppClient.connect(server.addr, { batching: false });
  await assert.rejects(
    unbatched.enqueue({ queue: "strictpay", jobType: "charge", payload: "300", idempotencyKey: "pay-1" }),
    IdempotencyKeyConflictError,
  );
  await assert.rejects(client.enqueue({ queue: "typed", jobType: "refund" }), UnknownJobTypeError);
});

test("enqueue with every field, then get, cancel, lookup and release", async () => {
  const client = await SeppClient.connect(server.addr);
  const runAt = new Date(Date.now() + 3600_000);
  const ack = await client.enqueue({
    queue: "fields",
    jobType: "receipt",
    payload: new Uint8Array([0, 1, 2, 255]),
    idempotencyKey: "fields-1",
    priority: 7,
    runAt,
    maxAttempts: 3,
    headers: { trace: "abc" },
  });
  assert.equal(ack.deduplicated, false);
  assert.equal(ack.idempotencyKey, "fields-1");
  assert.ok(ack.dedupExpiresAt && ack.dedupExpiresAt.getTime() > Date.now());
  const job = await client.getJob(ack.jobId);
  assert.equal(job.jobId, ack.jobId);
  assert.equal(job.queue, "fields");
  assert.equal(job.jobType, "receipt");
  assert.deepEqual([...job.payload], [0, 1, 2, 255]);
  assert.equal(job.idempotencyKey, "fields-1");
  assert.equal(job.priority, 7);
  assert.equal(job.runAt?.getTime(), runAt.getTime());
  assert.equal(job.maxAttempts, 3);
  assert.deepEqual(job.headers, { trace: "abc" });
  assert.equal(job.state, "scheduled");

  const hit = await client.enqueue({ queue: "fields", jobType: "receipt", payload: new Uint8Array([0, 1, 2, 255]), idempotencyKey: "fields-1" });
  assert.deepEqual([hit.jobId, hit.deduplicated], [ack.jobId, true]);
  const look = await client.lookupIdempotencyKey("fields", "fields-1");
  assert.equal(look.found, true);
  assert.equal(look.idempotencyKey, "fields-1");
  assert.equal(look.jobId, ack.jobId);
  assert.equal(look.hits, 1n);
  assert.equal(look.state, "scheduled");
  assert.ok(look.firstEnqueuedAt && look.expiresAt && look.expiresAt > look.firstEnqueuedAt);

  const cancelled = await client.cancelJob(ack.jobId);
  assert.equal(cancelled.state, "cancelled");
  assert.equal((await client.lookupIdempotencyKey("fields", "fields-1")).state, "cancelled");

  const rel = await client.releaseIdempotencyKey("fields", "fields-1");
  assert.deepEqual(rel, { released: true, jobId: ack.jobId, idempotencyKey: "fields-1" });
  assert.equal((await client.lookupIdempotencyKey("fields", "fields-1")).found, false);
  assert.equal((await client.releaseIdempotencyKey("fields", "fields-1")).released, false);
  const fresh = await client.enqueue({ queue: "fields", jobType: "receipt", idempotencyKey: "fields-1" });
  assert.notEqual(fresh.jobId, ack.jobId);
  assert.equal(fresh.deduplicated, false);
  assert.equal((await client.getJob(ack.jobId)).state, "cancelled", "release never touches the job");

  await assert.rejects(client.getJob("01a00000-0000-7000-8000-000000000000"), JobNotFoundError);
  await assert.rejects(client.getJob("not-an-id"), (err: unknown) => err instanceof SeppError);
  // A string payload is sent as UTF-8.
  const text = await client.enqueue({ queue: "fields", jobType: "t", payload: "héllo" });
  assert.equal(bytesToText((await client.getJob(text.jobId)).payload), "héllo");
  assert.equal(text.idempotencyKey, undefined, "an enqueue without a key has none");
});

test("on a queue with key_fields the server says the key: in the ack, and by lookup or release of a payload", async () => {
  for (const batching of [true, false]) {
    const client = await SeppClient.connect(server.addr, { batching });
    const account = `acc-${batching}`;
    const ack = await client.enqueue({ queue: "transfers", jobType: "move", payload: `{"amount": 100, "account": "${account}"}` });
    assert.equal(ack.deduplicated, false);
    // The key docs/idempotency.md shows for such a payload: the fields' values, as canonical JSON.
    assert.equal(ack.idempotencyKey, `["${account}",100]`);
    // The same fields written otherwise derive the same key: a hit, and the ack says the key.
    const retry = await client.enqueue({ queue: "transfers", jobType: "move", payload: `{"account":"${account}","amount":1.00e2,"note":"retry"}` });
    assert.deepEqual([retry.jobId, retry.deduplicated, retry.idempotencyKey], [ack.jobId, true, ack.idempotencyKey]);
    const [item] = await client.enqueueBatch([{ queue: "transfers", jobType: "move", payload: `{"account":"${account}","amount":100}` }]);
    assert.ok(item?.ok);
    assert.deepEqual([item.ack.jobId, item.ack.idempotencyKey], [ack.jobId, ack.idempotencyKey], "a batch item's ack says its key too");

    // Lookup by payload: the server derives the key and says which.
    const byPayload = await client.lookupIdempotencyKeyByPayload("transfers", `{"amount":1e2,"account":"${account}"}`);
    assert.deepEqual([byPayload.found, byPayload.jobId, byPayload.idempotencyKey, byPayload.hits], [true, ack.jobId, ack.idempotencyKey, 2n]);
    // The ack's key looks up the same record.
    const byKey = await client.lookupIdempotencyKey("transfers", ack.idempotencyKey!);
    assert.deepEqual([byKey.found, byKey.jobId, byKey.idempotencyKey], [true, ack.jobId, ack.idempotencyKey]);

    // Release by payload: the next enqueue of that payload is a new job.
    const rel = await client.releaseIdempotencyKeyByPayload("transfers", new TextEncoder().encode(`{"account":"${account}","amount":100}`));
    assert.deepEqual(rel, { released: true, jobId: ack.jobId, idempotencyKey: ack.idempotencyKey });
    const gone = await client.lookupIdempotencyKeyByPayload("transfers", `{"account":"${account}","amount":100}`);
    assert.deepEqual([gone.found, gone.idempotencyKey], [false, ack.idempotencyKey]);
    const fresh = await client.enqueue({ queue: "transfers", jobType: "move", payload: `{"account":"${account}","amount":100}` });
    assert.notEqual(fresh.jobId, ack.jobId);
    assert.equal(fresh.deduplicated, false);
  }
});

test("a payload the server cannot derive a key from is an InvalidFieldError naming what to fix", async () => {
  const client = await SeppClient.connect(server.addr);
  // A field missing from the payload: the pointer names it.
  await assert.rejects(client.lookupIdempotencyKeyByPayload("transfers", '{"account":"acc-1"}'), (err: unknown) => {
    assert.ok(err instanceof InvalidFieldError, String(err));
    assert.equal(err.errorMetadata["pointer"], "/amount");
    return true;
  });
  // A queue without key_fields refuses a payload in place of the key.
  await assert.rejects(client.releaseIdempotencyKeyByPayload("fields", '{"account":"acc-1","amount":1}'), (err: unknown) => {
    assert.ok(err instanceof InvalidFieldError, String(err));
    assert.equal(err.errorMetadata["field"], "payload");
    assert.match(err.rawMessage, /no key_fields/);
    return true;
  });
  // An empty payload is refused before sending: the server would read it as no payload.
  const c = counter();
  const counted = await SeppClient.connect(server.addr, { interceptors: [c.interceptor] });
  const before = c.calls.length;
  await assert.rejects(counted.lookupIdempotencyKeyByPayload("transfers", ""), InvalidFieldError);
  assert.deepEqual(c.calls.slice(before), [], "nothing was sent");
});

test("the bearer token goes out as Authorization: Bearer, on the default and on a custom transport", async () => {
  const seen: Array<string | null> = [];
  const spy: Interceptor = (next) => async (req) => {
    seen.push(req.header.get("authorization"));
    return next(req);
  };
  const client = await SeppClient.connect(server.addr, { token: "s3cret", interceptors: [spy] });
  await client.enqueue({ queue: "q", jobType: "t" });
  assert.ok(seen.length >= 2);
  assert.ok(seen.every((h) => h === "Bearer s3cret"), JSON.stringify(seen));

  seen.splice(0);
  const transport = createGrpcTransport({ baseUrl: server.addr, interceptors: [spy] });
  const custom = await SeppClient.connect(server.addr, { transport, token: "t0ken" });
  await custom.enqueue({ queue: "q", jobType: "t" });
  assert.ok(seen.length >= 2 && seen.every((h: string | null) => h === "Bearer t0ken"), JSON.stringify(seen));
});

test("every protocol of the Node transport reaches the server", async () => {
  for (const protocol of ["grpc", "connect", "connect-json", "grpc-web"] as const) {
    const client = await SeppClient.connect(server.addr, { protocol });
    const a = await client.enqueue({ queue: "proto", jobType: "t", idempotencyKey: `p-${protocol}` });
    const b = await client.enqueue({ queue: "proto", jobType: "t", idempotencyKey: `p-${protocol}` });
    assert.deepEqual([b.jobId, b.deduplicated], [a.jobId, true], protocol);
    await assert.rejects(client.enqueue({ queue: "strictpay", jobType: "x", payload: "other", idempotencyKey: "pay-1" }), IdempotencyKeyConflictError, protocol);
  }
});

test("connect fails with an UnavailableError when nothing listens", async () => {
  const dead = await TestServer.start("");
  const addr = dead.addr;
  await dead.stop();
  await assert.rejects(SeppClient.connect(addr), (err: unknown) => err instanceof SeppError && err.reason === "UNAVAILABLE");
  await assert.rejects(SeppClient.connect("ftp://x"), InvalidFieldError);
});

test("close() ends the connection; calls after it fail", async () => {
  const client = await SeppClient.connect(server.addr);
  await client.enqueue({ queue: "q", jobType: "t" });
  client.close();
  await assert.rejects(client.enqueue({ queue: "q", jobType: "t" }), (err: unknown) => err instanceof SeppError);
});
