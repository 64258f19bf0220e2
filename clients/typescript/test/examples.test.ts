// Every example in examples/ runs against a real server and prints what its
// comments promise (the seed example and the lab have their own tests, and
// outbox.mjs runs in outbox.test.ts, against PostgreSQL).
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { TestServer, packageDir } from "./server.js";

const run = promisify(execFile);
let server: TestServer;
before(async () => {
  server = await TestServer.start("");
});
after(async () => server?.stop());

async function example(name: string): Promise<string> {
  const { stdout } = await run(process.execPath, [`examples/${name}.mjs`, server.addr], { cwd: packageDir });
  return stdout;
}

test("examples/batch.mjs", async () => {
  const out = await example("batch");
  assert.match(out, /^job 0: \S+ deduplicated=false$/m);
  assert.match(out, /^job 1: \S+ deduplicated=true$/m);
  assert.match(out, /^job 2: IDEMPOTENCY_KEY_TOO_LONG$/m);
  assert.match(out, /^atomic batch refused: IDEMPOTENCY_KEY_EMPTY at job 1; job 0 written: false$/m);
});

test("examples/keys.mjs", async () => {
  const out = await example("keys");
  assert.match(out, /^found=true job=the original hits=1 state=available$/m);
  assert.match(out, /^cancelled: state=cancelled$/m);
  assert.match(out, /^released=true; the next enqueue is a new job: true$/m);
});

test("examples/errors.mjs", async () => {
  const out = await example("errors");
  assert.match(out, /^IDEMPOTENCY_KEY_TOO_LONG: idempotency key is 258 bytes; the limit is 256/m);
  assert.match(out, /^IDEMPOTENCY_KEY_EMPTY: nothing was sent$/m);
  assert.match(out, /^JOB_NOT_FOUND \(a ConnectError: true, a SeppError: true, code 5\)$/m);
});

test("examples/worker.mjs", async () => {
  const out = await example("worker");
  assert.match(out, /^ada@example.com: completed sent to ada@example.com$/m);
  assert.match(out, /^nobody: dead malformed address "nobody"$/m);
  assert.match(out, /^worker stopped$/m);
});

test("examples/effect.mjs", async () => {
  assert.match(await example("effect"), /^two jobs, receipts em_1 and em_1, mails sent=1$/m);
});

// The Idempotency-Key examples (docs/http-idempotency.md) serve on a port the
// OS picks (PORT=0) and print what their client got.
async function served(name: string): Promise<string> {
  const { stdout } = await run(process.execPath, [`examples/${name}.mjs`, server.addr], {
    cwd: packageDir,
    env: { ...process.env, PORT: "0" },
  });
  return stdout;
}

test("examples/http-idempotency-express.mjs", async () => {
  const out = await served("http-idempotency-express");
  assert.match(out, /^first: 201 \{"id":1,"sku":"a-1"\} replayed=null$/m);
  assert.match(out, /^retry: 201 \{"id":1,"sku":"a-1"\} replayed=true$/m);
  assert.match(out, /^no key: 400 IDEMPOTENCY_KEY_REQUIRED$/m);
  assert.match(out, /^orders created: 1$/m);
});

test("examples/http-idempotency-fetch.mjs", async () => {
  const out = await served("http-idempotency-fetch");
  assert.match(out, /^first: 201 \{"id":1,"sku":"a-1"\} replayed=null$/m);
  assert.match(out, /^retry: 201 \{"id":1,"sku":"a-1"\} replayed=true$/m);
  assert.match(out, /^same key, another order: 422 IDEMPOTENCY_KEY_REUSED$/m);
  assert.match(out, /^orders created: 1$/m);
});
