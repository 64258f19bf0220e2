// The dashboard in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core) against a real `sepp serve`, which serves the dashboard
// under /ui/ from the files embedded in the binary. The jobs are made with
// the TypeScript client, one in every state, and a follow-up held back on a
// run_again queue; the test opens every page,
// checks what it shows, requeues the dead job through the UI and checks
// with the client that the server did it. Another server relays an outbox
// table in PostgreSQL (SEPP_TEST_POSTGRES_URL, through psql) and one whose
// database is down, for the Queues page's outbox cards.
//
// Screenshots go to a temporary directory, or to docs/dashboard-*.png with
// SEPP_DASHBOARD_SCREENSHOTS=1 (how the committed ones were made).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { SeppClient } from "sepp";
import { TestServer, repoDir, seppBin } from "./server.js";
import { PG_URL, postgresMissing, psql } from "./postgres.js";

const shots = process.env["SEPP_DASHBOARD_SCREENSHOTS"] ? join(repoDir, "docs") : mkdtempSync(join(tmpdir(), "sepp-dashboard-shots-"));
const Q = "orders";

let server: TestServer;
let browser: Browser;
let client: SeppClient;
const ids: Record<string, string> = {};
let derivedKey = "";
/** Script errors and CSP refusals on any page. */
const pageErrors: string[] = [];

/** Polls `f` until it returns a truthy value (every 100 ms, up to 15 s). */
async function until<T>(what: string, f: () => Promise<T>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await f();
      if (v) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${String(last)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function text(page: Page, selector: string): Promise<string> {
  return (await page.locator(selector).first().textContent({ timeout: 10_000 })) ?? "";
}

/** Enqueues (some duplicates) and completes jobs on queue for ms. */
async function trafficOn(queue: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  let i = 0;
  while (Date.now() < end) {
    for (let k = 0; k < 3; k++, i++) {
      await client.enqueue({ queue, jobType: "welcome", idempotencyKey: `welcome-${i}`, payload: JSON.stringify({ user: i }) });
    }
    await client.enqueue({ queue, jobType: "welcome", idempotencyKey: `welcome-${i - 1}`, payload: JSON.stringify({ user: i - 1 }) });
    for (const r of await client.reserve({ queues: [queue], maxJobs: 2, leaseMs: 60_000 })) {
      await client.complete(r.job.jobId, r.leaseToken);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function openPage(width = 1280, height = 800): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height } });
  page.on("pageerror", (err) => pageErrors.push(String(err)));
  page.on("console", (m) => {
    if (m.type() === "error" && /Content Security Policy|Refused to/.test(m.text())) pageErrors.push(m.text());
  });
  return page;
}

before(async () => {
  // Q derives the key of an enqueue that gives none from its payload's
  // /account and /amount; every other enqueue here gives its key.
  // "sync" runs a key again when it is enqueued while its job runs: the
  // follow-up waits, held back, for the job page to show.
  server = await TestServer.start(`
[[queues]]
name = "${Q}"
key_fields = ["/account", "/amount"]

[[queues]]
name = "sync"
when_running = "run_again"
`);
  client = await SeppClient.connect(server.addr);
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });

  // One job per state. Reserve takes the only available job each time, so
  // the jobs meant to stay available are enqueued last.
  const reserveOne = async () => {
    const [r] = await client.reserve({ queues: [Q], maxJobs: 1, leaseMs: 600_000, waitMs: 1000 });
    assert.ok(r, "reserved a job");
    return r;
  };
  ids["completed"] = (await client.enqueue({ queue: Q, jobType: "receipt", idempotencyKey: "receipt-77", payload: JSON.stringify({ order: 77 }) })).jobId;
  let r = await reserveOne();
  await client.complete(r.job.jobId, r.leaseToken, JSON.stringify({ sent: true, message_id: "m-77" }));

  ids["dead"] = (await client.enqueue({ queue: Q, jobType: "charge", idempotencyKey: "charge-88", payload: JSON.stringify({ order: 88, amount: 12.5 }), maxAttempts: 1 })).jobId;
  r = await reserveOne();
  await client.fail(r.job.jobId, r.leaseToken, "card declined: insufficient funds", { permanent: true });

  ids["reserved"] = (await client.enqueue({ queue: Q, jobType: "ship", idempotencyKey: "ship-99", payload: JSON.stringify({ order: 99 }) })).jobId;
  r = await reserveOne();
  assert.equal(r.job.jobId, ids["reserved"]);

  ids["cancelled"] = (await client.enqueue({ queue: Q, jobType: "receipt", idempotencyKey: "receipt-66", payload: "plain text payload" })).jobId;
  await client.cancelJob(ids["cancelled"]);

  ids["scheduled"] = (await client.enqueue({ queue: Q, jobType: "reminder", idempotencyKey: "reminder-55", payload: new Uint8Array([0xff, 0x00, 0x10]), runAt: new Date(Date.now() + 3600_000) })).jobId;

  ids["available"] = (
    await client.enqueue({
      queue: Q,
      jobType: "receipt",
      idempotencyKey: "order-1001",
      payload: JSON.stringify({ order: 1001, email: "ada@example.com", items: [{ sku: "tea", qty: 2 }] }),
      headers: { "trace-id": "t-1001" },
    })
  ).jobId;
  // A duplicate: one dedup hit on order-1001.
  const dup = await client.enqueue({ queue: Q, jobType: "receipt", idempotencyKey: "order-1001", payload: JSON.stringify({ order: 1001, email: "ada@example.com", items: [{ sku: "tea", qty: 2 }] }) });
  assert.equal(dup.deduplicated, true);
  // A job whose key the server derives from its payload (the queue's
  // key_fields), for the key search by payload; the ack says the key.
  const payload = JSON.stringify({ account: "acct-7", amount: 42, note: "x" });
  const derived = await client.enqueue({ queue: Q, jobType: "payout", payload });
  ids["derived"] = derived.jobId;
  derivedKey = derived.idempotencyKey ?? "";
  assert.equal(derivedKey, '["acct-7",42]');

  // An effect with a result.
  const claim = await client.claimEffect({ scope: "payments", key: "charge-order-1001" });
  await client.completeEffect(claim.token, JSON.stringify({ charge_id: "ch_1001" }));

  const q = (await client.listQueues()).find((x) => x.name === Q)!;
  assert.deepEqual(
    [q.available, q.scheduled, q.reserved, q.completed, q.dead, q.cancelled].map(Number),
    [2, 1, 1, 1, 1, 1],
    "one job in every state (two available)",
  );
});

after(async () => {
  client?.close();
  await browser?.close();
  await server?.stop();
});

test("/ redirects to the dashboard, whose Queues page shows the queue's counts", async () => {
  const page = await openPage();
  await page.goto(server.addr + "/");
  assert.equal(new URL(page.url()).pathname, "/ui/");
  const card = `[data-queue="${Q}"]`;
  const counts: Record<string, string> = { available: "2", scheduled: "1", reserved: "1", completed: "1", dead: "1", cancelled: "1" };
  for (const [state, n] of Object.entries(counts)) {
    await until(`${state} = ${n}`, async () => (await text(page, `${card} [data-state="${state}"] dd`)) === n);
  }
  // Dedup records: one per keyed job, all 7 jobs have keys.
  assert.equal(await text(page, `${card} [data-state="dedup"] dd`), "7");
  // No [[outboxes]]: no outbox panel.
  assert.equal(await page.locator(".outboxes, [data-outbox]").count(), 0);
  // Live: a new job shows up without a reload.
  ids["live"] = (await client.enqueue({ queue: Q, jobType: "receipt", idempotencyKey: "order-1002", payload: "{}" })).jobId;
  await until("available = 3 after an enqueue", async () => (await text(page, `${card} [data-state="available"] dd`)) === "3");
  // Pause and resume through the buttons.
  await page.locator(`${card} button`, { hasText: "Pause" }).click();
  await until("paused", async () => (await client.listQueues()).find((x) => x.name === Q)!.paused);
  await page.locator(`${card} button`, { hasText: "Resume" }).click();
  await until("resumed", async () => !(await client.listQueues()).find((x) => x.name === Q)!.paused);
  // Traffic on a second queue for the rate charts: enqueues, duplicates
  // (dedup hits) and completions, for a few polls.
  const traffic = trafficOn("emails", 8500);
  await traffic;
  await until("the emails queue", async () => Number(await text(page, `[data-queue="emails"] [data-state="completed"] dd`)) > 0);
  const rates = await text(page, `[data-queue="emails"] .sparks`);
  assert.match(rates, /enqueue \d/);
  assert.match(rates, /dedup hit \d/);
  assert.match(rates, /complete \d/);
  await page.screenshot({ path: join(shots, "dashboard-queues.png") });
  await page.close();
});

test("the Queues page shows each outbox: its lag, counts, when it was read and its last error", async (t) => {
  const missing = postgresMissing();
  if (missing) {
    t.skip(missing);
    return;
  }
  // An outbox table in a PostgreSQL schema of the test's own, with a row
  // ten minutes old that another session holds locked from before the
  // server starts: the relay passes it by (SKIP LOCKED), and it is the lag.
  const schema = `dashboard_outbox_${Date.now()}_${process.pid}`;
  const table = `${schema}.sepp_outbox`;
  psql(`CREATE SCHEMA ${schema};\n` + execFileSync(seppBin(), ["outbox", "schema", "--dialect", "postgres", "--table", table], { encoding: "utf8" }));
  psql(`INSERT INTO ${table} (id, queue, job_type, payload, created_at) VALUES ('held', 'mail', 'late', '\\x7b7d', clock_timestamp() - interval '10 minutes')`);
  const holder = spawn("psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", PG_URL], { stdio: ["pipe", "ignore", "inherit"] });
  holder.stdin.write(`BEGIN;\nSELECT id FROM ${table} WHERE id = 'held' FOR UPDATE;\n`);
  let ob: TestServer | undefined;
  try {
    await until("the other session to lock the row", async () => psql(`SELECT count(*) FROM (SELECT id FROM ${table} WHERE id = 'held' FOR UPDATE SKIP LOCKED) s`) === "0");
    // A second outbox whose database refuses connections: its error shows.
    ob = await TestServer.start(
      `[[queues]]\nname = "mail"\n\n` +
        `[[outboxes]]\nname = "orders-db"\ndialect = "postgres"\nurl_env = "SEPP_DASHBOARD_TEST_OUTBOX"\ntable = "${table}"\npoll_interval_ms = 200\n\n` +
        `[[outboxes]]\nname = "reports-db"\ndialect = "postgres"\nurl_env = "SEPP_DASHBOARD_TEST_NO_DB"\npoll_interval_ms = 200\n`,
      { SEPP_DASHBOARD_TEST_OUTBOX: PG_URL, SEPP_DASHBOARD_TEST_NO_DB: "postgres://sepp@127.0.0.1:1/reports?sslmode=disable&connect_timeout=2" },
    );
    // In one transaction, so one pass relays one and moves the other (its
    // headers are not a JSON object of strings) to the dead table.
    psql(`BEGIN;
INSERT INTO ${table} (id, queue, job_type, payload) VALUES ('ok-1', 'mail', 'receipt', '\\x7b7d');
INSERT INTO ${table} (id, queue, job_type, payload, headers) VALUES ('bad-1', 'mail', 'receipt', '\\x7b7d', '["not", "an object"]');
COMMIT;`);
    const page = await openPage();
    await page.goto(`${ob.addr}/ui/#/queues`);
    const card = '[data-outbox="orders-db"]';
    await until("orders-db relayed 1 row", async () => (await text(page, `${card} [data-field="relayed"] dd`)) === "1");
    assert.equal(await text(page, `${card} [data-field="dead"] dd`), "1");
    // Ten minutes (and the seconds since), as the pages show spans.
    assert.equal(await text(page, `${card} [data-field="lag"] dd`), "10m");
    assert.match((await page.locator(`${card} [data-field="lag"]`).getAttribute("title")) ?? "", /: 6\d{5} ms$/);
    assert.equal(await text(page, `${card} [data-testid="outbox-dialect"]`), "postgres");
    assert.equal(await text(page, `${card} [data-testid="outbox-table"]`), table);
    assert.match(await text(page, `${card} [data-testid="outbox-checked"]`), /^checked \d+s ago$/);
    assert.equal(await page.locator(`${card} [data-testid="outbox-error"]`).count(), 0);
    assert.equal(await page.locator(`${card}.failing`).count(), 0);
    // The unreachable one: its error, highlighted, and never read.
    const failing = '[data-outbox="reports-db"]';
    await until("reports-db's error", async () => (await page.locator(`${failing} [data-testid="outbox-error"]`).count()) === 1);
    assert.match(await text(page, `${failing} [data-testid="outbox-error"]`), /127\.0\.0\.1|connect|refused/i);
    assert.equal(await page.locator(`${failing}.failing`).count(), 1);
    assert.equal(await text(page, `${failing} [data-testid="outbox-table"]`), "sepp_outbox");
    assert.equal(await text(page, `${failing} [data-field="lag"] dd`), "0s");
    assert.equal(await text(page, `${failing} [data-testid="outbox-checked"]`), "not read yet");
    // The queue the relay filled is on the page too.
    assert.equal(await text(page, `[data-queue="mail"] [data-state="available"] dd`), "1");

    // The lock released, the row is relayed and the lag drops to 0, live.
    holder.stdin.end("ROLLBACK;\n");
    await until("orders-db caught up", async () => (await text(page, `${card} [data-field="lag"] dd`)) === "0s" && (await text(page, `${card} [data-field="relayed"] dd`)) === "2");
    // At 375 px wide the outboxes fit the screen too.
    await page.setViewportSize({ width: 375, height: 812 });
    await page.waitForTimeout(300);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 375, `the page is ${width} px wide`);
    await page.close();
  } finally {
    if (holder.exitCode === null && holder.signalCode === null) holder.kill("SIGKILL");
    await ob?.stop();
    psql(`DROP SCHEMA ${schema} CASCADE`);
  }
});

test("Jobs lists the queue's jobs by state and filters by type and key prefix", async () => {
  const page = await openPage();
  await page.goto(`${server.addr}/ui/#/jobs?queue=${Q}`);
  await until("all jobs listed", async () => (await page.locator("tr[data-job]").count()) === 8);
  await page.locator('select[name="state"]').selectOption("dead");
  await until("only the dead job", async () => (await page.locator("tr[data-job]").count()) === 1 && (await page.locator(`tr[data-job="${ids["dead"]}"]`).count()) === 1);
  await page.locator('select[name="state"]').selectOption("");
  await until("all again", async () => (await page.locator("tr[data-job]").count()) === 8);
  await page.locator('input[name="prefix"]').fill("order-");
  await until("key prefix order-", async () => (await page.locator("tr[data-job]").count()) === 2);
  await page.locator('input[name="prefix"]').fill("");
  await page.locator('input[name="type"]').fill("receipt");
  await until("type receipt", async () => (await page.locator("tr[data-job]").count()) === 4);
  await page.locator('input[name="type"]').fill("");
  await until("all again", async () => (await page.locator("tr[data-job]").count()) === 8);
  await page.screenshot({ path: join(shots, "dashboard-jobs.png") });
  // One page only here: no next page.
  assert.equal(await page.locator(".pager button", { hasText: "Next" }).isDisabled(), true);
  // Paging with ListJobs' page tokens: 60 jobs are two pages of 50.
  const results = await client.enqueueBatch(Array.from({ length: 60 }, (_, i) => ({ queue: "bulk", jobType: "export", idempotencyKey: `export-${i}`, payload: JSON.stringify({ part: i }) })));
  assert.ok(results.every((r) => r.ok));
  await page.goto(`${server.addr}/ui/#/jobs?queue=bulk`);
  await until("page 1: 50 jobs", async () => (await page.locator("tr[data-job]").count()) === 50);
  const first = await page.locator("tr[data-job]").first().getAttribute("data-job");
  await page.locator(".pager button", { hasText: "Next" }).click();
  await until("page 2: 10 jobs", async () => (await page.locator("tr[data-job]").count()) === 10);
  assert.equal(await text(page, ".pager span"), "Page 2");
  assert.equal(await page.locator(".pager button", { hasText: "Next" }).isDisabled(), true);
  assert.equal(await page.locator(`tr[data-job="${first}"]`).count(), 0, "page 2 holds other jobs");
  await page.locator(".pager button", { hasText: "Previous" }).click();
  await until("back on page 1", async () => (await page.locator("tr[data-job]").count()) === 50 && (await page.locator(`tr[data-job="${first}"]`).count()) === 1);
  await page.goto(`${server.addr}/ui/#/jobs?queue=${Q}`);
  await until("orders again", async () => (await page.locator("tr[data-job]").count()) === 8);
  await page.locator(`tr[data-job="${ids["available"]}"] a`).first().click();
  await until("the job page", async () => page.url().includes(`#/job/${ids["available"]}`));
  await page.close();
});

test("Job shows the payload as pretty JSON, headers, the dedup record and a timeline", async () => {
  const page = await openPage();
  await page.goto(`${server.addr}/ui/#/job/${ids["available"]}`);
  const payload = await until("payload", async () => text(page, '[data-testid="payload"]'));
  assert.ok(payload.includes('"email": "ada@example.com"') && payload.includes('\n  "order": 1001'), payload);
  assert.ok((await page.locator(".fields").allTextContents()).join(" ").includes("t-1001"), "the header is shown");
  const dedup = await text(page, '[data-testid="dedup"]');
  assert.match(dedup, /order-1001/);
  assert.match(dedup, /Hits\s*1/);
  assert.ok((await page.locator(".timeline li").count()) >= 2, "a timeline");
  await page.screenshot({ path: join(shots, "dashboard-job.png"), fullPage: true });

  // The dead job: last error; the completed one: its result; binary payload as hex; text as text.
  await page.goto(`${server.addr}/ui/#/job/${ids["dead"]}`);
  await until("last error", async () => (await text(page, ".error-text")).includes("card declined"));
  await page.goto(`${server.addr}/ui/#/job/${ids["completed"]}`);
  await until("result", async () => (await text(page, '[data-testid="result"]')).includes('"message_id": "m-77"'));
  await page.goto(`${server.addr}/ui/#/job/${ids["scheduled"]}`);
  await until("hex payload", async () => (await text(page, '[data-testid="payload"]')).includes("ff 00 10"));
  await page.goto(`${server.addr}/ui/#/job/${ids["cancelled"]}`);
  await until("text payload", async () => (await text(page, '[data-testid="payload"]')) === "plain text payload");

  // Cancel from the job's page, through the confirmation.
  await page.goto(`${server.addr}/ui/#/job/${ids["live"]}`);
  await page.locator("button", { hasText: "Cancel job" }).click();
  await page.getByTestId("confirm").click();
  await until("cancelled on the page", async () => (await text(page, ".fields .badge")) === "cancelled");
  assert.equal((await client.getJob(ids["live"]!)).state, "cancelled");
  await page.close();
});

test("a waiting follow-up says what holds it back and links the job it follows; its queue counts it", async () => {
  const req = { queue: "sync", jobType: "rebuild", idempotencyKey: "cache" };
  const first = await client.enqueue(req);
  const [running] = await client.reserve({ queues: ["sync"], maxJobs: 1, leaseMs: 600_000, waitMs: 1000 });
  assert.equal(running?.job.jobId, first.jobId);
  const follow = await client.enqueue(req);
  assert.equal(follow.followsJobId, first.jobId);

  const page = await openPage();
  await page.goto(`${server.addr}/ui/#/queues`);
  await until("the held follow-up count", async () => (await text(page, `[data-queue="sync"] [data-held="follow_up"] dd`)) === "1");
  assert.equal(await page.locator(`[data-queue="sync"] [data-held]`).count(), 1, "only the holds that hold a job are shown");
  assert.equal(await page.locator(`[data-queue="${Q}"] [data-held]`).count(), 0);

  await page.goto(`${server.addr}/ui/#/jobs?queue=sync`);
  await until("the follow-up, marked held", async () => (await page.locator(`tr[data-job="${follow.jobId}"] .badge.held`).count()) === 1);
  assert.equal(await page.locator(`tr[data-job="${first.jobId}"] .badge.held`).count(), 0);

  await page.goto(`${server.addr}/ui/#/job/${follow.jobId}`);
  const held = await until("what holds it back", async () => text(page, '[data-testid="held-by"]'));
  assert.equal(held, `waiting for job ${first.jobId} to end`);
  assert.equal(await text(page, ".fields .badge"), "scheduled");
  assert.match((await page.locator(".fields").first().textContent()) ?? "", new RegExp(`Follows\\s*${first.jobId}`));
  // The link opens the job it waits for, which is held by nothing.
  await page.locator('[data-testid="held-by"] a').click();
  await until("the running job's page", async () => page.url().includes(`#/job/${first.jobId}`));
  await until("the running job", async () => (await text(page, ".fields .badge")) === "reserved");
  assert.equal(await page.locator('[data-testid="held-by"]').count(), 0);

  // Once the running job completes, the follow-up is released.
  await client.complete(running!.job.jobId, running!.leaseToken);
  await page.goto(`${server.addr}/ui/#/job/${follow.jobId}`);
  await until("the follow-up, available", async () => (await text(page, ".fields .badge")) === "available");
  assert.equal(await page.locator('[data-testid="held-by"]').count(), 0);
  await page.goto(`${server.addr}/ui/#/queues`);
  await until("no held count", async () => (await text(page, `[data-queue="sync"] [data-state="available"] dd`)) === "1");
  assert.equal(await page.locator(`[data-queue="sync"] [data-held]`).count(), 0);
  await page.close();
});

test("Key search answers 'was this processed?' by key and by payload", async () => {
  const page = await openPage();
  await page.goto(`${server.addr}/ui/#/keys`);
  await page.locator('input[name="queue"]').fill(Q);
  await page.locator('input[name="key"]').fill("receipt-77");
  await page.locator('button[type="submit"]').click();
  const res = await until("key result", async () => text(page, '[data-testid="key-result"]'));
  assert.ok(res.includes(ids["completed"]!) && res.includes("yes: completed"), res);
  assert.match(res, /m-77/);
  await page.screenshot({ path: join(shots, "dashboard-keys.png") });

  await page.locator('input[name="mode"][value="payload"]').check();
  await page.locator('textarea[name="payload"]').fill(JSON.stringify({ amount: 42, account: "acct-7", note: "other" }));
  await page.locator('button[type="submit"]').click();
  await until("derived key result", async () => (await text(page, '[data-testid="key-result"]')).includes(ids["derived"]!));
  assert.ok((await text(page, '[data-testid="key-result"]')).includes(derivedKey), "the derived key is shown");

  await page.goto(`${server.addr}/ui/#/keys?queue=${Q}&key=never-sent`);
  await until("not found", async () => (await text(page, '[data-testid="key-result"]')).includes("Not found"));
  await page.close();
});

test("Dead letter requeues a dead job after the confirmation, and the server sees it", async () => {
  const page = await openPage();
  await page.goto(`${server.addr}/ui/#/dead?queue=${Q}`);
  const row = `tr[data-job="${ids["dead"]}"]`;
  await page.locator(row).waitFor({ timeout: 10_000 });
  assert.equal(await page.locator("tr[data-job]").count(), 1);
  await page.locator(`${row} button`, { hasText: "Requeue" }).click();
  const dialog = page.getByRole("dialog");
  await dialog.waitFor();
  assert.match((await dialog.textContent()) ?? "", new RegExp(ids["dead"]!));
  await page.screenshot({ path: join(shots, "dashboard-dead.png") });
  // Cancel first: nothing happens.
  await dialog.getByRole("button", { name: "Cancel" }).click();
  assert.equal((await client.getJob(ids["dead"]!)).state, "dead");
  await page.locator(`${row} button`, { hasText: "Requeue" }).click();
  await page.getByTestId("confirm").click();
  await until("Requeued 1 job", async () => (await text(page, ".notice")).includes("Requeued 1 job"));
  const job = await client.getJob(ids["dead"]!);
  assert.equal(job.state, "available");
  assert.equal(job.attempts, 0);
  await until("the list empties", async () => (await page.locator("tr[data-job]").count()) === 0);

  // Purge, of the selected jobs, also behind the confirmation. One of the
  // two is purged elsewhere after it was selected: the other is purged, and
  // the page names the one that was no longer dead.
  const refund = (await client.enqueue({ queue: "refunds", jobType: "refund", payload: "{}" })).jobId;
  const gone = (await client.enqueue({ queue: "refunds", jobType: "refund", payload: "{}" })).jobId;
  for (const r of await client.reserve({ queues: ["refunds"], maxJobs: 2, waitMs: 1000 })) {
    await client.fail(r.job.jobId, r.leaseToken, "no such order", { permanent: true });
  }
  await page.goto(`${server.addr}/ui/#/dead?queue=refunds`);
  await page.locator(`tr[data-job="${refund}"] input[type="checkbox"]`).check();
  await page.locator(`tr[data-job="${gone}"] input[type="checkbox"]`).check();
  assert.equal(await client.purgeDeadJobs({ jobIds: [gone] }), 1);
  await page.locator("button", { hasText: "Purge selected" }).click();
  assert.match((await page.getByRole("dialog").textContent()) ?? "", /cannot be undone/);
  await page.getByTestId("confirm").click();
  await until("Purged 1 job", async () => (await text(page, ".notice")).includes("Purged 1 job"));
  assert.match(await text(page, '[role="alert"]'), new RegExp(`no dead job with id ${gone}`));
  await assert.rejects(client.getJob(refund), /not found|NOT_FOUND/i);
  await page.close();
});

test("Effects reads an effect key", async () => {
  const page = await openPage();
  await page.goto(`${server.addr}/ui/#/effects`);
  await page.locator('input[name="scope"]').fill("payments");
  await page.locator('input[name="key"]').fill("charge-order-1001");
  await page.locator('button[type="submit"]').click();
  const res = await until("effect result", async () => text(page, '[data-testid="effect-result"]'));
  assert.match(res, /completed/);
  assert.match(res, /"charge_id": "ch_1001"/);
  await page.screenshot({ path: join(shots, "dashboard-effects.png") });
  await page.close();
});

test("at 375 px wide the pages fit the screen", async () => {
  const page = await openPage(375, 812);
  for (const route of [`#/queues`, `#/jobs?queue=${Q}`, `#/job/${ids["available"]}`, `#/keys?queue=${Q}&key=receipt-77`, `#/dead?queue=${Q}`]) {
    await page.goto(`${server.addr}/ui/${route}`);
    await page.locator("main section h1").waitFor();
    await page.waitForTimeout(300);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 375, `${route}: the page is ${width} px wide`);
  }
  await page.goto(`${server.addr}/ui/#/queues`);
  await until("counts", async () => (await text(page, `[data-queue="${Q}"] [data-state="available"] dd`)) !== "");
  await page.screenshot({ path: join(shots, "dashboard-mobile.png"), fullPage: true });
  await page.close();
});

test("with [auth] on, the dashboard asks for a token once and sends it", async () => {
  const secret = "dashboard-test-secret";
  const auth = await TestServer.start(
    `[auth]\nmetrics_token_role = "reader"\n\n[[auth.tokens]]\nname = "ops"\nsecret_env = "SEPP_DASHBOARD_TEST_TOKEN"\nroles = ["admin"]\n`,
    { SEPP_DASHBOARD_TEST_TOKEN: secret },
  );
  try {
    const c = await SeppClient.connect(auth.addr, { token: secret });
    await c.enqueue({ queue: "secured", jobType: "t", payload: "{}" });
    c.close();
    const page = await openPage();
    await page.goto(`${auth.addr}/ui/`);
    const dialog = page.getByRole("dialog", { name: "Token" });
    await dialog.waitFor({ timeout: 10_000 });
    await dialog.locator('input[name="token"]').fill(secret);
    await dialog.getByRole("button", { name: "Use token" }).click();
    await until("the queue, with the token", async () => (await text(page, '[data-queue="secured"] [data-state="available"] dd')) === "1");
    assert.equal(await page.evaluate(() => sessionStorage.getItem("sepp.dashboard.token")), secret);
    // A reload keeps the token (sessionStorage): no dialog.
    await page.reload();
    await until("the queue after a reload", async () => (await text(page, '[data-queue="secured"] [data-state="available"] dd')) === "1");
    assert.equal(await page.getByRole("dialog").count(), 0);
    await page.close();
  } finally {
    await auth.stop();
  }
});

test("no page threw or broke the Content-Security-Policy", () => {
  assert.deepEqual(pageErrors, []);
});

test("the Queues page shows each schedule: its cron, catch_up, last and next tick", async () => {
  const sv = await TestServer.start(
    `[[schedules]]\nname = "beat"\ncron = "@every 1s"\nqueue = "beats"\njob_type = "beat"\ncatch_up = "none"\n\n` +
      `[[schedules]]\nname = "nightly-report"\ncron = "0 3 * * *"\ntimezone = "Europe/Berlin"\nqueue = "reports"\njob_type = "report.nightly"\n`,
  );
  try {
    const page = await openPage();
    await page.goto(`${sv.addr}/ui/#/queues`);
    const beat = '[data-schedule="beat"]';
    await until("beat's first tick", async () => /^\d+s ago$/.test(await text(page, `${beat} [data-field="last-tick"] dd`)));
    assert.equal(await text(page, `${beat} [data-testid="schedule-cron"]`), "@every 1s (UTC)");
    assert.equal(await text(page, `${beat} [data-testid="schedule-catch-up"]`), "catch up: none");
    assert.equal(await text(page, `${beat} [data-testid="schedule-queue"]`), "beats · beat");
    assert.match(await text(page, `${beat} [data-field="next-tick"] dd`), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
    assert.equal(await page.locator(`${beat} [data-testid="schedule-error"]`).count(), 0);
    // The tick's job is on the page too, on the schedule's queue.
    await until("a job on beats", async () => Number(await text(page, `[data-queue="beats"] [data-state="available"] dd`)) >= 1);

    const nightly = '[data-schedule="nightly-report"]';
    assert.equal(await text(page, `${nightly} [data-testid="schedule-cron"]`), "0 3 * * * (Europe/Berlin)");
    assert.equal(await text(page, `${nightly} [data-testid="schedule-catch-up"]`), "catch up: last");
    assert.equal(await text(page, `${nightly} [data-field="last-tick"] dd`), "none yet");
    // 03:00 in Berlin is 01:00 or 02:00 UTC.
    assert.match(await text(page, `${nightly} [data-field="next-tick"] dd`), / 0[12]:00:00Z$/);
    // At 375 px wide the schedules fit the screen too.
    await page.setViewportSize({ width: 375, height: 812 });
    await page.waitForTimeout(300);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 375, `the page is ${width} px wide`);
    await page.close();
  } finally {
    await sv.stop();
  }
});
