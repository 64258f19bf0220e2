// The retry policy every Sepp client shares, read from ../retry-policy.json
// (clients/retry-policy.json): this client's delay function against each of
// the file's cases, the one reason it resends on, and its default number of
// resends, for enqueues (batched or not), Complete, Fail and CompleteEffect.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Interceptor } from "@connectrpc/connect";
import { SeppClient, Reason, isRetryable, newSeppError, retryDelay, UnavailableError } from "sepp";
import { TestServer, packageDir } from "./server.js";

interface Policy {
  retries: number;
  base_ms: number;
  cap_ms: number;
  retry_on: string[];
  cases: Array<{ retry: number; random: number; delay_ms: number }>;
}

const policy = JSON.parse(readFileSync(join(packageDir, "../retry-policy.json"), "utf8")) as Policy;

test("retryDelay gives every case of retry-policy.json its delay", () => {
  assert.ok(policy.cases.length > 0, "the policy file has cases");
  for (const c of policy.cases) {
    assert.equal(retryDelay(c.retry, c.random), c.delay_ms, `retry ${c.retry}, random ${c.random}`);
  }
  // The ceiling itself, just below random = 1, for every retry the cases skip.
  for (let retry = 0; retry < 40; retry++) {
    const ceiling = Math.min(policy.cap_ms, policy.base_ms * 2 ** retry);
    assert.ok(Math.abs(retryDelay(retry, 1 - 1e-12) - ceiling) < 1e-6, `retry ${retry}: ceiling ${ceiling}`);
  }
});

test("only the reasons of retry_on are resent", () => {
  for (const reason of Object.values(Reason)) {
    assert.equal(isRetryable(newSeppError(reason, "x")), policy.retry_on.includes(reason), reason);
  }
});

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

test("by default a request whose fate is unknown is resent the policy's number of times", async () => {
  const dead = await TestServer.start("");
  const addr = dead.addr;
  await dead.stop(); // nothing listens there now: every try fails with UNAVAILABLE
  const tries = policy.retries + 1;
  const calls = async (run: (c: SeppClient) => Promise<unknown>, batching = true): Promise<string[]> => {
    const c = counter();
    const client = await SeppClient.connect(addr, { healthCheck: false, batching, interceptors: [c.interceptor] });
    await assert.rejects(run(client), UnavailableError);
    return c.calls;
  };
  // One after the other would wait up to 1.55 s each; the runs are independent.
  const [batched, unbatched, unkeyed, complete, fail, completeEffect] = await Promise.all([
    calls((c) => c.enqueue({ queue: "q", jobType: "t", idempotencyKey: "k" })),
    calls((c) => c.enqueue({ queue: "q", jobType: "t", idempotencyKey: "k" }), false),
    calls((c) => c.enqueue({ queue: "q", jobType: "t" })),
    calls((c) => c.complete("01a00000-0000-7000-8000-000000000000", "token")),
    calls((c) => c.fail("01a00000-0000-7000-8000-000000000000", "token", "boom")),
    calls((c) => c.completeEffect("token", "result")),
  ]);
  assert.deepEqual(batched, Array(tries).fill("Enqueue"), "a keyed enqueue, batched");
  assert.deepEqual(unbatched, Array(tries).fill("Enqueue"), "a keyed enqueue, not batched");
  assert.deepEqual(unkeyed, ["Enqueue"], "an unkeyed enqueue is never resent");
  assert.deepEqual(complete, Array(tries).fill("Complete"));
  assert.deepEqual(fail, Array(tries).fill("Fail"));
  assert.deepEqual(completeEffect, Array(tries).fill("CompleteEffect"));
});
