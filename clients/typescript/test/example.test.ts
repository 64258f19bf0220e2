// Acceptance 1: the seed page's TypeScript example, saved byte for byte as
// examples/idempotency.mjs, runs unchanged against a fresh `sepp serve`: the
// first run prints "enqueued <id>", the second "already enqueued earlier as
// <same id>"; and the Go client sees the same job (and the other way round).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { TestServer, packageDir, portIsFree, seppBin } from "./server.js";

const run = promisify(execFile);

/** The seed's snippet: the TypeScript block of the doc page, as pasted. */
const seedSnippet = `import { SeppClient } from "sepp";

const client = await SeppClient.connect("http://localhost:50051");

// Derive the key from what the job is "about", so a retry of the same
// logical enqueue carries the same key.
const ack = await client.enqueue({
  queue: "emails",
  jobType: "receipt",
  idempotencyKey: "receipt-order-8a3f",
});

if (ack.deduplicated) {
  console.log(\`already enqueued earlier as \${ack.jobId}\`);
} else {
  console.log(\`enqueued \${ack.jobId}\`);
}
`;

/** Starts a server the example can reach as localhost:50051, and says how to run node for it. */
async function serverFor50051(): Promise<{ server: TestServer; nodeArgs: string[]; env: NodeJS.ProcessEnv }> {
  if (await portIsFree(50051)) {
    return { server: await TestServer.start("", 50051), nodeArgs: [], env: process.env };
  }
  // Port 50051 is taken on this machine: serve elsewhere and redirect.
  const server = await TestServer.start("");
  console.log(`# port 50051 is busy; the example's connections are redirected to ${server.port}`);
  return {
    server,
    nodeArgs: ["--import", join(packageDir, "test/fixtures/redirect-50051.mjs")],
    env: { ...process.env, SEPP_TEST_REDIRECT_PORT: String(server.port) },
  };
}

async function runExample(nodeArgs: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const { stdout } = await run(process.execPath, [...nodeArgs, "examples/idempotency.mjs"], { cwd: packageDir, env });
  return stdout.trim();
}

test("the example file is the seed's snippet, byte for byte", () => {
  assert.equal(readFileSync(join(packageDir, "examples/idempotency.mjs"), "utf8"), seedSnippet);
});

test("the seed example: enqueued, then already enqueued earlier as the same id", async () => {
  const { server, nodeArgs, env } = await serverFor50051();
  try {
    const first = await runExample(nodeArgs, env);
    const m = /^enqueued (\S+)$/.exec(first);
    assert.ok(m, `first run printed ${JSON.stringify(first)}`);
    const second = await runExample(nodeArgs, env);
    assert.equal(second, `already enqueued earlier as ${m[1]}`);

    // The Go client sees the same job for the same key.
    const { stdout } = await run(seppBin(), [
      "enqueue", "--queue", "emails", "--type", "receipt", "--key", "receipt-order-8a3f", "--json", "--addr", server.addr,
    ]);
    const goAck = JSON.parse(stdout) as { jobId: string; deduplicated: boolean };
    assert.deepEqual([goAck.jobId, goAck.deduplicated], [m[1], true]);
  } finally {
    await server.stop();
  }
});

test("a key enqueued by the Go client first is a hit for the example", async () => {
  const { server, nodeArgs, env } = await serverFor50051();
  try {
    const { stdout } = await run(seppBin(), [
      "enqueue", "--queue", "emails", "--type", "receipt", "--key", "receipt-order-8a3f", "--json", "--addr", server.addr,
    ]);
    const goAck = JSON.parse(stdout) as { jobId: string; deduplicated: boolean };
    assert.equal(goAck.deduplicated, false);
    assert.equal(await runExample(nodeArgs, env), `already enqueued earlier as ${goAck.jobId}`);
  } finally {
    await server.stop();
  }
});
