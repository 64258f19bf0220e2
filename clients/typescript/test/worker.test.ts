// Acceptance 5: the worker runtime. 2,000 jobs at concurrency 16, each
// handler run once; a permanent error dead-letters its job; a worker killed
// mid-job has its job redelivered; SIGTERM lets running jobs finish. Also
// retry-after, lease extension, results, and effect-in-progress retries.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import {
  SeppClient,
  Worker,
  PermanentError,
  EffectInProgressError,
  LeaseLostError,
  Reason,
  retryAfter,
  bytesToText,
  type Logger,
} from "sepp";
import { TestServer, packageDir, waitFor } from "./server.js";

const quiet: Logger = { info() {}, warn() {} };

let server: TestServer;
before(async () => {
  server = await TestServer.start(`
[[queues]]
name = "slowretry"
backoff_initial_ms = 3600000

[[queues]]
name = "shortlease"
lease_ms = 1000

[[queues]]
name = "killed"
lease_ms = 1000
`);
});
after(async () => server?.stop());

async function completed(client: SeppClient, queue: string): Promise<bigint> {
  return (await client.listQueues()).find((q) => q.name === queue)?.completed ?? 0n;
}

test("2,000 jobs at concurrency 16: every handler ran once", async () => {
  const client = await SeppClient.connect(server.addr);
  const n = 2000;
  const ids = new Set<string>();
  for (let i = 0; i < n; i += 500) {
    const res = await client.enqueueBatch(
      Array.from({ length: 500 }, (_, k) => ({ queue: "many", jobType: "t", payload: String(i + k), idempotencyKey: `m-${i + k}` })),
    );
    for (const r of res) ids.add(r.ack!.jobId);
  }
  assert.equal(ids.size, n);
  const runs = new Map<string, number>();
  let active = 0;
  let peak = 0;
  const worker = new Worker(client, { queues: ["many"], concurrency: 16, waitMs: 200, logger: quiet });
  worker.handle("t", async (job) => {
    runs.set(job.jobId, (runs.get(job.jobId) ?? 0) + 1);
    active++;
    peak = Math.max(peak, active);
    await new Promise((r) => setTimeout(r, 2));
    active--;
    return `done ${bytesToText(job.payload)}`;
  });
  const running = worker.run();
  await waitFor("all jobs completed", async () => (await completed(client, "many")) === BigInt(n), 120_000);
  await worker.stop();
  await running;
  assert.equal(runs.size, n);
  assert.ok([...runs.values()].every((c) => c === 1), "each handler ran once");
  assert.ok([...runs.keys()].every((id) => ids.has(id)));
  assert.ok(peak <= 16 && peak > 1, `peak concurrency ${peak}`);
  const sample = await client.getJob([...ids][1234]!);
  assert.equal(sample.state, "completed");
  assert.equal(sample.attempts, 1);
  assert.equal(bytesToText(sample.result), "done 1234");
});

test("a permanent error dead-letters the job; retryAfter and effect-in-progress retry soon", async () => {
  const client = await SeppClient.connect(server.addr);
  const perm = await client.enqueue({ queue: "slowretry", jobType: "perm" });
  const later = await client.enqueue({ queue: "slowretry", jobType: "later" });
  const busy = await client.enqueue({ queue: "slowretry", jobType: "busy" });
  const tries = new Map<string, number>();
  const worker = new Worker(client, { queues: ["slowretry"], waitMs: 200, logger: quiet });
  worker
    .handle("perm", () => {
      throw new PermanentError("malformed address");
    })
    .handle("later", (job) => {
      tries.set("later", (tries.get("later") ?? 0) + 1);
      // With the queue's one-hour backoff this would not finish in the test.
      if (job.attempt === 1) throw retryAfter(new Error("rate limited"), 100);
      return "ok";
    })
    .handle("busy", (job) => {
      if (job.attempt === 1) throw new EffectInProgressError(Reason.EffectInProgress, "mail in progress elsewhere");
      return "ok";
    });
  const running = worker.run();
  await waitFor("the permanent failure to be dead", async () => (await client.getJob(perm.jobId)).state === "dead");
  await waitFor("the retried job to complete", async () => (await client.getJob(later.jobId)).state === "completed");
  await waitFor("the busy job to complete", async () => (await client.getJob(busy.jobId)).state === "completed");
  await worker.stop();
  await running;
  const dead = await client.getJob(perm.jobId);
  assert.equal(dead.attempts, 1);
  assert.equal(dead.lastError, "malformed address");
  assert.equal((await client.getJob(later.jobId)).attempts, 2);
  assert.equal((await client.getJob(busy.jobId)).attempts, 2);
  // Dead jobs can be requeued (attempts reset) and purged.
  assert.equal(await client.requeueDeadJobs({ jobIds: [perm.jobId] }), 1);
  assert.notEqual((await client.getJob(perm.jobId)).state, "dead");
});

test("the lease is extended while a handler outlives it", async () => {
  const client = await SeppClient.connect(server.addr);
  const ack = await client.enqueue({ queue: "shortlease", jobType: "slow" });
  const worker = new Worker(client, { queues: ["shortlease"], waitMs: 200, logger: quiet });
  worker.handle("slow", async (job) => {
    await new Promise((r) => setTimeout(r, 2500)); // two and a half leases
    assert.equal(job.signal.aborted, false);
  });
  const running = worker.run();
  await waitFor("the slow job to complete", async () => (await client.getJob(ack.jobId)).state === "completed");
  await worker.stop();
  await running;
  assert.equal((await client.getJob(ack.jobId)).attempts, 1, "delivered once");
});

/** Spawns the fixture worker process and collects its output lines. */
function workerProcess(queue: string, handlerMs: number): { proc: ChildProcess; lines: string[]; exited: Promise<number | null> } {
  const proc = spawn(process.execPath, [join(packageDir, "test/fixtures/worker-proc.mjs"), server.addr, queue, String(handlerMs)], {
    cwd: packageDir,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines: string[] = [];
  let buf = "";
  proc.stdout!.on("data", (b: Buffer) => {
    buf += b.toString();
    const parts = buf.split("\n");
    buf = parts.pop()!;
    lines.push(...parts);
  });
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  return { proc, lines, exited };
}

test("a worker killed mid-job has its job redelivered", async () => {
  const client = await SeppClient.connect(server.addr);
  const ack = await client.enqueue({ queue: "killed", jobType: "t", idempotencyKey: "kill-me" });
  const w = workerProcess("killed", 60_000);
  await waitFor("the job to start in the worker process", () => w.lines.some((l) => l.startsWith(`started ${ack.jobId} 1`)));
  w.proc.kill("SIGKILL");
  await w.exited;
  const seen: number[] = [];
  const worker = new Worker(client, { queues: ["killed"], waitMs: 200, logger: quiet });
  worker.handle("t", (job) => {
    seen.push(job.attempt);
    return "second delivery";
  });
  const running = worker.run();
  await waitFor("the redelivered job to complete", async () => (await client.getJob(ack.jobId)).state === "completed");
  await worker.stop();
  await running;
  assert.deepEqual(seen, [2]);
  const job = await client.getJob(ack.jobId);
  assert.equal(job.attempts, 2);
  assert.equal(bytesToText(job.result), "second delivery");
});

test("SIGTERM lets running jobs finish before the worker exits", async () => {
  const client = await SeppClient.connect(server.addr);
  const acks = await Promise.all([0, 1, 2].map((i) => client.enqueue({ queue: "term", jobType: "t", idempotencyKey: `term-${i}` })));
  const w = workerProcess("term", 700);
  await waitFor("three jobs to start", () => w.lines.filter((l) => l.startsWith("started")).length === 3);
  w.proc.kill("SIGTERM");
  assert.equal(await w.exited, 0);
  assert.equal(w.lines.filter((l) => l.startsWith("finished")).length, 3);
  assert.equal(w.lines.at(-1), "stopped");
  for (const a of acks) {
    const job = await client.getJob(a.jobId);
    assert.equal(job.state, "completed", a.jobId);
    assert.equal(bytesToText(job.result), "finished");
    assert.equal(job.attempts, 1);
  }
});

test("after the shutdown timeout a running job is left for redelivery, unreported", async () => {
  const client = await SeppClient.connect(server.addr);
  const ack = await client.enqueue({ queue: "cut", jobType: "t" });
  let started = false;
  const worker = new Worker(client, { queues: ["cut"], waitMs: 200, shutdownTimeoutMs: 100, logger: quiet });
  worker.handle("t", async (job) => {
    started = true;
    await new Promise((_, rej) => job.signal.addEventListener("abort", () => rej(job.signal.reason)));
  });
  const running = worker.run();
  await waitFor("the job to start", () => started);
  await worker.stop();
  await running;
  const job = await client.getJob(ack.jobId);
  assert.deepEqual([job.state, job.attempts, job.lastError], ["reserved", 1, ""]);
});

test("a lost lease aborts the handler's signal", async () => {
  const client = await SeppClient.connect(server.addr);
  const ack = await client.enqueue({ queue: "shortlease", jobType: "lost" });
  let started = false;
  let reason: unknown;
  const worker = new Worker(client, { queues: ["shortlease"], waitMs: 200, logger: quiet });
  worker.handle("lost", async (job) => {
    started = true;
    await new Promise<void>((res) => job.signal.addEventListener("abort", () => res()));
    reason = job.signal.reason;
    throw reason;
  });
  const running = worker.run();
  await waitFor("the job to start", () => started);
  await client.cancelJob(ack.jobId); // the token no longer holds the lease
  await waitFor("the handler to be aborted", () => reason !== undefined);
  await worker.stop();
  await running;
  assert.ok(reason instanceof LeaseLostError, String(reason));
  assert.equal((await client.getJob(ack.jobId)).state, "cancelled");
});
