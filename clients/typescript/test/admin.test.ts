// The admin calls against a real server: pausing or resuming a queue the
// server does not know is refused unless `create`, and a dead-letter requeue
// or purge by id reports the ids that named no dead job.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Code } from "@connectrpc/connect";
import { SeppClient, JobNotFoundError, NotDeadError, Reason, UnknownQueueError } from "sepp";
import { TestServer } from "./server.js";

/** A well-formed job id that names no job. */
const NO_SUCH_JOB = "0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d";

let server: TestServer;
let client: SeppClient;

before(async () => {
  server = await TestServer.start(`
[[queues]]
name = "declared"
`);
  client = await SeppClient.connect(server.addr);
});

after(async () => {
  await client?.close();
  await server?.stop();
});

/** Whether listQueues lists `queue` as paused (undefined: not listed). */
async function paused(queue: string): Promise<boolean | undefined> {
  return (await client.listQueues()).find((q) => q.name === queue)?.paused;
}

/** Enqueues `n` jobs to `queue` and dead-letters them; returns their ids. */
async function deadJobs(queue: string, n: number): Promise<string[]> {
  for (let i = 0; i < n; i++) await client.enqueue({ queue, jobType: "t" });
  const got = await client.reserve({ queues: [queue], maxJobs: n });
  assert.equal(got.length, n);
  for (const r of got) await client.fail(r.job.jobId, r.leaseToken, "boom", { permanent: true });
  return got.map((r) => r.job.jobId);
}

test("pausing or resuming a queue the server does not know is an UnknownQueueError, and changes nothing", async () => {
  for (const call of [() => client.pauseQueue("nosuchqueue"), () => client.resumeQueue("nosuchqueue")]) {
    await assert.rejects(call(), (err: unknown) => {
      assert.ok(err instanceof UnknownQueueError, String(err));
      assert.equal(err.reason, Reason.UnknownQueue);
      assert.equal(err.code, Code.NotFound);
      assert.equal(err.errorMetadata["queue"], "nosuchqueue");
      assert.match(err.rawMessage, /create/);
      return true;
    });
  }
  assert.equal(await paused("nosuchqueue"), undefined, "a refused pause must not list the queue");
});

test("create: true pauses a queue before its first job, and resumes it", async () => {
  await client.pauseQueue("early", { create: true });
  assert.equal(await paused("early"), true);
  // Known now (its pause flag is stored): no create needed.
  await client.resumeQueue("early");
  assert.equal(await paused("early"), false);
  await client.resumeQueue("never-paused", { create: true });
});

test("a declared queue, or one with jobs, pauses without create", async () => {
  await client.pauseQueue("declared");
  assert.equal(await paused("declared"), true);
  await client.resumeQueue("declared");
  await client.enqueue({ queue: "hasjobs", jobType: "t" });
  await client.pauseQueue("hasjobs");
  assert.equal(await paused("hasjobs"), true);
  await client.resumeQueue("hasjobs");
  assert.equal(await paused("hasjobs"), false);
});

test("requeue by id: the dead ones are requeued, the others thrown back in a NotDeadError with the count", async () => {
  const [dead] = await deadJobs("dlq-requeue", 1);
  const live = await client.enqueue({ queue: "dlq-requeue", jobType: "t" });
  await assert.rejects(client.requeueDeadJobs({ jobIds: [dead!, NO_SUCH_JOB, live.jobId, NO_SUCH_JOB] }), (err: unknown) => {
    assert.ok(err instanceof NotDeadError, String(err));
    assert.ok(err instanceof JobNotFoundError, "a NotDeadError is a JobNotFoundError");
    assert.equal(err.reason, Reason.JobNotFound);
    assert.equal(err.code, Code.NotFound);
    assert.equal(err.count, 1);
    assert.deepEqual(err.jobIds, [NO_SUCH_JOB, live.jobId], "each once, in the order given");
    assert.equal(err.rawMessage, `no dead job with id ${NO_SUCH_JOB}, ${live.jobId}`);
    return true;
  });
  assert.equal((await client.getJob(dead!)).state, "available");
  assert.equal((await client.getJob(live.jobId)).state, "available");
});

test("purge by id: the dead ones are purged, the others thrown back in a NotDeadError with the count", async () => {
  const [a, b] = await deadJobs("dlq-purge", 2);
  await assert.rejects(client.purgeDeadJobs({ jobIds: [a!, NO_SUCH_JOB] }), (err: unknown) => {
    assert.ok(err instanceof NotDeadError, String(err));
    assert.equal(err.count, 1);
    assert.deepEqual(err.jobIds, [NO_SUCH_JOB]);
    return true;
  });
  await assert.rejects(client.getJob(a!), JobNotFoundError);
  // A dead job of another queue is not one of queue's.
  await assert.rejects(client.purgeDeadJobs({ queue: "dlq-requeue", jobIds: [b!] }), (err: unknown) => {
    assert.ok(err instanceof NotDeadError);
    assert.equal(err.count, 0);
    assert.deepEqual(err.jobIds, [b]);
    return true;
  });
  assert.equal((await client.getJob(b!)).state, "dead");
});

test("requeue and purge return a plain count when every id was dead, or for a whole queue", async () => {
  const ids = await deadJobs("dlq-all", 3);
  assert.equal(await client.requeueDeadJobs({ jobIds: [ids[0]!] }), 1);
  assert.equal(await client.purgeDeadJobs({ queue: "dlq-all", all: true }), 2);
  assert.equal(await client.purgeDeadJobs({ queue: "dlq-all", all: true }), 0);
});
