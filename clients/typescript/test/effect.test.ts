// Acceptance 6: the seed lab's three scenes with the TypeScript effect
// helper (examples/invoicelab.mjs): mails sent 1 where the Go lab says 1.
// Also: result replay, fail closed on bad keys and on an unreachable server,
// failOpen as an explicit opt-in, release on error, and lease extension.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { SeppClient, Effects, InvalidEffectKeyError, UnavailableError, type Logger } from "sepp";
import { TestServer, packageDir } from "./server.js";

let server: TestServer;
before(async () => {
  server = await TestServer.start("");
});
after(async () => server?.stop());

interface Lab {
  crash: { plain: { deliveries: number; mails: number }; guarded: { deliveries: number; mails: number } };
  twoWorkers: { wait: { a: string; b: string; mails: number }; raise: { a: string; b: string; mails: number } };
  keys: { jobId: number; colon: number; dot: number };
}

test("the lab's three scenes: two, two, one where the post says so; one wherever the Go lab says one", async () => {
  const { runLab } = (await import(pathToFileURL(join(packageDir, "examples/invoicelab.mjs")).href)) as {
    runLab: (c: SeppClient) => Promise<Lab>;
  };
  const lab = await runLab(await SeppClient.connect(server.addr));
  assert.deepEqual(lab.crash, { plain: { deliveries: 2, mails: 2 }, guarded: { deliveries: 2, mails: 1 } });
  assert.deepEqual(lab.twoWorkers.wait, { a: "em_1", b: "em_1", mails: 1 });
  assert.deepEqual(lab.twoWorkers.raise, { a: "em_1", b: "in progress, requeue", mails: 1 });
  // The key is the effect's identity: by job id two mails; by the effect's
  // name one, and a colon is an ordinary character in Sepp.
  assert.deepEqual(lab.keys, { jobId: 2, colon: 1, dot: 1 });
});

test("the lab runs as a program and prints its tables", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ["examples/invoicelab.mjs", server.addr], { cwd: packageDir });
  assert.match(stdout, /handler under an effect key = job id\s+deliveries=2  mails sent=1/);
  assert.match(stdout, /in_flight='raise'\s+\{'A': 'em_1', 'B': 'in progress, requeue'\}   mails sent=1/);
  assert.match(stdout, /key = 'order-9.invoice': the same two jobs\s+-> mails sent=1/);
});

test("a repeat replays the stored result without running fn; doJSON round-trips", async () => {
  const client = await SeppClient.connect(server.addr);
  const effects = new Effects(client);
  let runs = 0;
  const fn = async () => `receipt-${++runs}`;
  const first = await effects.do("mail.test", "replay-1", fn);
  const again = await effects.do("mail.test", "replay-1", fn);
  assert.deepEqual([first.text(), first.replayed, again.text(), again.replayed, runs], ["receipt-1", false, "receipt-1", true, 1]);
  const v = await effects.doJSON("charge.test", "c-1", async () => ({ id: "ch_1", amount: 100 }));
  const w = await effects.doJSON("charge.test", "c-1", async () => ({ id: "ch_2", amount: 0 }));
  assert.deepEqual([v, w], [{ id: "ch_1", amount: 100 }, { id: "ch_1", amount: 100 }]);
  const rec = await client.getEffect("mail.test", "replay-1");
  assert.equal(rec.state, "completed");
});

test("an error from fn releases the claim, so a retry runs it", async () => {
  const effects = new Effects(await SeppClient.connect(server.addr));
  let runs = 0;
  await assert.rejects(
    effects.do("mail.test", "flaky-1", async () => {
      runs++;
      throw new Error("smtp down");
    }),
    /smtp down/,
  );
  const ok = await effects.do("mail.test", "flaky-1", async () => `sent after ${++runs}`);
  assert.deepEqual([ok.text(), ok.replayed, runs], ["sent after 2", false, 2]);
});

test("fail closed: a bad key or an unreachable server is an error and fn does not run", async () => {
  const effects = new Effects(await SeppClient.connect(server.addr));
  let runs = 0;
  const fn = async () => {
    runs++;
    return "x";
  };
  for (const [scope, key] of [
    ["mail", ""],
    ["", "k"],
    ["mail", "k".repeat(257)],
    ["mail", "é".repeat(129)],
    ["mail", "\ud800"],
  ] as const) {
    await assert.rejects(effects.do(scope, key, fn), InvalidEffectKeyError, `${scope}/${key.slice(0, 10)}`);
  }
  // A colon, a slash, a space, an emoji: ordinary characters.
  for (const key of ["order-9:invoice", "a/b c", "🧾"]) await effects.do("mail.chars", key, fn);
  assert.equal(runs, 3);

  const dead = await TestServer.start("");
  const unreachable = new Effects(await SeppClient.connect(dead.addr));
  await dead.stop();
  runs = 0;
  await assert.rejects(unreachable.do("mail", "k", fn), UnavailableError);
  assert.equal(runs, 0, "fail closed: the effect did not run");

  const warnings: string[] = [];
  const logger: Logger = { info() {}, warn: (m) => warnings.push(m) };
  const res = await unreachable.do("mail", "k", fn, { failOpen: true, logger });
  assert.deepEqual([res.unprotected, res.text(), runs], [true, "x", 1]);
  assert.equal(unreachable.unprotectedRuns.get("mail"), 1);
  assert.match(warnings[0] ?? "", /UNPROTECTED/);
});

test("the claim's lease is extended while fn outlives it", async () => {
  const effects = new Effects(await SeppClient.connect(server.addr));
  let runs = 0;
  const slow = effects.do("mail.test", "slow-1", async (signal) => {
    runs++;
    await new Promise((r) => setTimeout(r, 2500)); // two and a half leases
    assert.equal(signal.aborted, false);
    return "slow";
  }, { leaseMs: 1000 });
  // Past the first lease, another holder in raise mode still finds it in progress.
  await new Promise((r) => setTimeout(r, 1500));
  await assert.rejects(effects.do("mail.test", "slow-1", async () => "other", { mode: "raise" }), (err: unknown) => {
    return err instanceof Error && (err as { reason?: string }).reason === "EFFECT_IN_PROGRESS";
  });
  assert.equal((await slow).text(), "slow");
  assert.equal(runs, 1);
});
