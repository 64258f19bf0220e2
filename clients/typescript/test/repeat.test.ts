// A Complete, Fail or CompleteEffect sent again with the token whose first
// call was committed (its answer lost to a timeout or a restart) succeeds and
// changes nothing; another token gets LeaseLostError. The client resends
// these calls after transport errors for that reason.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { SeppClient, LeaseLostError } from "sepp";
import { TestServer } from "./server.js";

let server: TestServer;
let client: SeppClient;
before(async () => {
  server = await TestServer.start("");
  client = await SeppClient.connect(server.addr);
});
after(async () => {
  client?.close();
  await server?.stop();
});

const otherToken = "0123456789abcdef0123456789abcdef";

test("a repeated Complete or Fail with the same token succeeds; another token is refused", async () => {
  await client.enqueue({ queue: "repeat", jobType: "t", idempotencyKey: "done" });
  await client.enqueue({ queue: "repeat", jobType: "t", idempotencyKey: "failed" });
  const [done, failed] = await client.reserve({ queues: ["repeat"], maxJobs: 2 });
  assert.ok(done && failed);
  await client.complete(done.job.jobId, done.leaseToken, "ok");
  await client.complete(done.job.jobId, done.leaseToken, "ok"); // the repeat
  await assert.rejects(client.complete(done.job.jobId, otherToken), LeaseLostError);
  const job = await client.getJob(done.job.jobId);
  assert.equal(job.state, "completed");
  assert.equal(new TextDecoder().decode(job.result), "ok");

  const first = await client.fail(failed.job.jobId, failed.leaseToken, "boom", { permanent: true });
  const again = await client.fail(failed.job.jobId, failed.leaseToken, "boom", { permanent: true });
  assert.deepEqual([first.state, first.alreadyFailed], ["dead", false]);
  assert.deepEqual([again.state, again.alreadyFailed], ["dead", true]);
});

test("a repeated CompleteEffect returns what the first call stored", async () => {
  const claim = await client.claimEffect({ scope: "repeat", key: "order-9.invoice" });
  assert.equal(claim.state, "acquired");
  const dec = (b: Uint8Array) => new TextDecoder().decode(b);
  assert.equal(dec(await client.completeEffect(claim.token, "em_1")), "em_1");
  assert.equal(dec(await client.completeEffect(claim.token, "em_2")), "em_1");
  await assert.rejects(client.completeEffect(otherToken, ""), LeaseLostError);
});
