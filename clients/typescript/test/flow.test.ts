// Flow control against a real server: a queue with when_running =
// "run_again" (a trigger while the key's job runs makes one follow-up, named
// in the ack, held until the running job ends), and [[queues.rules]] rules
// with a limit, refusing (action = "reject") or scheduling for when the
// window has room (action = "delay").
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { SeppClient, DedupRuleViolatedError, type Ack } from "sepp";
import { TestServer } from "./server.js";

let server: TestServer;
let client: SeppClient;

before(async () => {
  server = await TestServer.start(`
[[queues]]
name = "sync"
when_running = "run_again"

[[queues]]
name = "charges"
[[queues.rules]]
name = "account"
key_fields = ["/account"]
window_ms = 60000
limit = 2

[[queues]]
name = "mails"
[[queues.rules]]
name = "account"
key_fields = ["/account"]
window_ms = 60000
limit = 2
action = "delay"
`);
  client = await SeppClient.connect(server.addr);
});

after(async () => {
  await client?.close();
  await server?.stop();
});

test("run_again: a trigger while the job runs makes one follow-up that waits for it, then runs", async () => {
  const req = { queue: "sync", jobType: "rebuild", idempotencyKey: "cache" };
  const first = await client.enqueue(req);
  assert.equal(first.deduplicated, false);
  assert.equal(first.followsJobId, undefined);
  const running = await client.reserve({ queues: ["sync"], maxJobs: 10 });
  assert.deepEqual(
    running.map((r) => r.job.jobId),
    [first.jobId],
  );

  const follow = await client.enqueue(req);
  assert.equal(follow.deduplicated, false, "a trigger while the job runs is not a hit");
  assert.notEqual(follow.jobId, first.jobId);
  assert.equal(follow.followsJobId, first.jobId);

  const again = await client.enqueue(req);
  assert.equal(again.deduplicated, true, "a trigger while the follow-up waits is a hit on it");
  assert.equal(again.jobId, follow.jobId);
  assert.equal(again.followsJobId, undefined);

  const waiting = await client.getJob(follow.jobId);
  assert.equal(waiting.state, "scheduled");
  assert.equal(waiting.heldBy, "follow_up");
  assert.equal(waiting.followsJobId, first.jobId);
  assert.equal(waiting.heldUntil, undefined);
  const running0 = await client.getJob(first.jobId);
  assert.equal(running0.heldBy, undefined);
  assert.equal(running0.followsJobId, undefined);

  const sync = (await client.listQueues()).find((q) => q.name === "sync");
  assert.ok(sync, "sync is listed");
  assert.equal(sync.heldFollowUp, 1n);
  assert.equal(sync.heldConcurrency, 0n);
  assert.equal(sync.heldRate, 0n);

  // Nothing to reserve while the original runs.
  assert.deepEqual(await client.reserve({ queues: ["sync"], maxJobs: 10 }), []);
  await client.complete(running[0]!.job.jobId, running[0]!.leaseToken);
  const next = await client.reserve({ queues: ["sync"], maxJobs: 10, waitMs: 10_000 });
  assert.deepEqual(
    next.map((r) => r.job.jobId),
    [follow.jobId],
  );
  assert.equal(next[0]!.job.heldBy, undefined);
  assert.equal(next[0]!.job.followsJobId, undefined);
});

test("a rule with limit 2 refuses the third job of a key with the limit and when the window frees, and no job_id", async () => {
  const req = { queue: "charges", jobType: "charge", payload: JSON.stringify({ account: "a" }) };
  await client.enqueue(req);
  await client.enqueue(req);
  await assert.rejects(client.enqueue(req), (err: unknown) => {
    assert.ok(err instanceof DedupRuleViolatedError, String(err));
    assert.equal(err.errorMetadata["rule"], "account");
    assert.equal(err.errorMetadata["limit"], "2");
    assert.ok(err.errorMetadata["frees_at"], "frees_at is set");
    assert.equal(err.errorMetadata["job_id"], undefined);
    return true;
  });
});

test("a rule with action = delay accepts the third job of a key for when its window has room", async () => {
  const req = { queue: "mails", jobType: "mail", payload: JSON.stringify({ account: "a" }) };
  const before = Date.now();
  const acks: Ack[] = [];
  for (let i = 0; i < 3; i++) acks.push(await client.enqueue(req));
  const afterAll = Date.now();
  assert.equal(acks[0]!.delayedUntil, undefined);
  assert.equal(acks[1]!.delayedUntil, undefined);
  const until = acks[2]!.delayedUntil;
  assert.ok(until instanceof Date, "the third is delayed");
  // The first job's window ends a minute after it was enqueued.
  const first = await client.getJob(acks[0]!.jobId);
  assert.equal(until.getTime(), first.createdAt!.getTime() + 60_000);
  assert.ok(until.getTime() >= before + 60_000 - 1000 && until.getTime() <= afterAll + 60_000 + 1000, `${until.toISOString()}`);
  const delayed = await client.getJob(acks[2]!.jobId);
  assert.equal(delayed.state, "scheduled");
  assert.equal(delayed.runAt?.getTime(), until.getTime());
});
