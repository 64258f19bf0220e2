// Acceptance 4: the server is SIGKILLed and restarted (same port, same data
// directory) while 8 concurrent producers enqueue 2,000 keyed jobs through
// the client's own retries: every key ends with exactly one job.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { SeppClient, type Ack } from "sepp";
import { TestServer } from "./server.js";

let server: TestServer | undefined;
after(async () => server?.stop());

// Without batching the same test runs in CI's full tier (SEPP_CI_FULL=1)
// only: the crash path is the server's, and the default tier runs it once.
const full = process.env.SEPP_CI_FULL === "1";
for (const batching of [true, false]) {
  const skip = !batching && !full ? "CI's full tier runs it (SEPP_CI_FULL=1)" : false;
  test(`SIGKILL and restart under 8 keyed producers: one job per key (batching ${batching})`, { skip }, async () => {
    server = await TestServer.start("");
    const s = server;
    // Enough retries to ride out a restart on a loaded machine.
    let failedRpcs = 0;
    const client = await SeppClient.connect(s.addr, {
      batching,
      retries: { maxRetries: 60 },
      interceptors: [
        (next) => async (req) => {
          try {
            return await next(req);
          } catch (err) {
            failedRpcs++;
            throw err;
          }
        },
      ],
    });
    const total = 2000;
    const producers = 8;
    const queue = `crash-${batching}`;
    const acks = new Map<string, Ack>();
    let done = 0;
    const restarts: Promise<void>[] = [];
    const killAt = new Set([400, 1200]);
    const t0 = Date.now();
    await Promise.all(
      Array.from({ length: producers }, async (_, p) => {
        for (let i = p; i < total; i += producers) {
          const key = `order-${i}`;
          const ack = await client.enqueue({ queue, jobType: "t", payload: key, idempotencyKey: key });
          acks.set(key, ack);
          done++;
          if (killAt.has(done)) restarts.push(s.restart());
        }
      }),
    );
    await Promise.all(restarts);
    console.log(`# enqueued ${total} in ${Date.now() - t0} ms with ${failedRpcs} RPCs broken by the kills`);
    assert.equal(restarts.length, 2, "the server was killed twice mid-run");
    assert.ok(failedRpcs > 0, "the kills broke RPCs, which the client resent");
    assert.equal(acks.size, total);

    // Every key has one job: the ack's, the lookup's, and no other.
    const check = await SeppClient.connect(s.addr);
    const entries = [...acks];
    await Promise.all(
      Array.from({ length: 16 }, async (_, w) => {
        for (let i = w; i < entries.length; i += 16) {
          const [key, ack] = entries[i]!;
          const look = await check.lookupIdempotencyKey(queue, key);
          assert.ok(look.found, key);
          assert.equal(look.jobId, ack.jobId, key);
        }
      }),
    );
    assert.equal(new Set([...acks.values()].map((a) => a.jobId)).size, total);
    console.log(`# lookups done at ${Date.now() - t0} ms`);
    const q = (await check.listQueues()).find((x) => x.name === queue);
    assert.ok(q);
    const jobs = q.scheduled + q.available + q.reserved + q.completed + q.dead + q.cancelled;
    assert.equal(jobs, BigInt(total), "jobs in the queue");
    assert.equal(q.dedupRecords, BigInt(total));
    console.log(`# checks done at ${Date.now() - t0} ms`);
    await s.stop();
    server = undefined;
  });
}
