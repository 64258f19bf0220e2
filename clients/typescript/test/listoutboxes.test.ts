// listOutboxes against real servers relaying [[outboxes]] tables: one whose
// database cannot be reached is listed with its error; one in a PostgreSQL
// schema of the test's own (at SEPP_TEST_POSTGRES_URL, made with psql and
// `sepp outbox schema`) reports the rows it relayed and moved to the dead
// table, and the lag of a row it cannot claim yet (another session holds it
// locked, so the relay's SKIP LOCKED passes it by).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { SeppClient } from "sepp";
import { TestServer, seppBin, waitFor } from "./server.js";

const PG_URL = process.env["SEPP_TEST_POSTGRES_URL"] || "postgres://root@127.0.0.1:5432/test?sslmode=disable";

/** Runs SQL through psql on PG_URL and returns its unaligned output. */
function psql(sql: string): string {
  return execFileSync("psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", PG_URL], {
    input: sql,
    encoding: "utf8",
    stdio: ["pipe", "pipe", "pipe"],
  }).trim();
}

/**
 * Why PostgreSQL cannot be used here, or undefined when it can. Without
 * SEPP_TEST_POSTGRES_URL a missing psql or database skips the test; with it
 * (CI sets it) the test fails instead.
 */
function postgresMissing(): string | undefined {
  try {
    psql("SELECT 1");
    return undefined;
  } catch (err) {
    const why = `PostgreSQL at ${PG_URL} through psql: ${(err as Error).message.split("\n")[0]}`;
    if (process.env["SEPP_TEST_POSTGRES_URL"]) throw new Error(why);
    return why;
  }
}

test("an outbox whose database cannot be reached is listed, in config order, with its error", async () => {
  // Port 1 refuses connections; the SQLite file's directory does not exist.
  process.env["SEPP_TS_TEST_OUTBOX_PG"] = "postgres://sepp:s3cret@127.0.0.1:1/app?sslmode=disable&connect_timeout=2";
  process.env["SEPP_TS_TEST_OUTBOX_LITE"] = "/nonexistent-sepp-dir/app.db";
  const server = await TestServer.start(`
[[outboxes]]
name = "orders-db"
dialect = "postgres"
url_env = "SEPP_TS_TEST_OUTBOX_PG"
poll_interval_ms = 100

[[outboxes]]
name = "lite"
dialect = "sqlite"
url_env = "SEPP_TS_TEST_OUTBOX_LITE"
table = "jobs_out"
poll_interval_ms = 100
`);
  const client = await SeppClient.connect(server.addr);
  try {
    await waitFor("both relays to report an error", async () => (await client.listOutboxes()).every((o) => o.lastError !== ""));
    const [pg, lite, ...rest] = await client.listOutboxes();
    assert.deepEqual(rest, []);
    assert.ok(pg && lite);
    assert.deepEqual(
      { name: pg.name, dialect: pg.dialect, table: pg.table, lagMs: pg.lagMs, relayed: pg.relayed, dead: pg.dead, checkedAt: pg.checkedAt },
      { name: "orders-db", dialect: "postgres", table: "sepp_outbox", lagMs: 0, relayed: 0n, dead: 0n, checkedAt: undefined },
      "never read: no lag, no counts, no checkedAt",
    );
    assert.match(pg.lastError, /127\.0\.0\.1|connect|refused/i);
    assert.doesNotMatch(pg.lastError, /s3cret/, "the password is not shown");
    assert.equal(lite.name, "lite");
    assert.equal(lite.dialect, "sqlite");
    assert.equal(lite.table, "jobs_out");
    assert.equal(lite.checkedAt, undefined);
    assert.notEqual(lite.lastError, "");
    assert.equal(typeof pg.lagMs, "number");
  } finally {
    client.close();
    await server.stop();
  }
});

test("a server without outboxes lists none", async () => {
  const server = await TestServer.start();
  const client = await SeppClient.connect(server.addr);
  try {
    assert.deepEqual(await client.listOutboxes(), []);
  } finally {
    client.close();
    await server.stop();
  }
});

test("a PostgreSQL outbox reports the rows relayed and dead, the lag of a row not yet relayed, and when it looked", async (t) => {
  const missing = postgresMissing();
  if (missing) {
    t.skip(missing);
    return;
  }
  const schema = `ts_outbox_${Date.now()}_${process.pid}`;
  const table = `${schema}.sepp_outbox`;
  psql(`CREATE SCHEMA ${schema};\n` + execFileSync(seppBin(), ["outbox", "schema", "--dialect", "postgres", "--table", table], { encoding: "utf8" }));
  // A row ten minutes old, held locked by another session before the relay
  // starts: the relay cannot claim it, and it is the lag.
  psql(`INSERT INTO ${table} (id, queue, job_type, payload, created_at) VALUES ('held', 'outboxed', 'late', '\\x7b7d', clock_timestamp() - interval '10 minutes')`);
  const holder = spawn("psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", PG_URL], { stdio: ["pipe", "ignore", "inherit"] });
  const holderExit = new Promise<number | null>((res) => holder.once("exit", (code) => res(code)));
  holder.stdin.write(`BEGIN;\nSELECT id FROM ${table} WHERE id = 'held' FOR UPDATE;\n`);
  let server: TestServer | undefined;
  let client: SeppClient | undefined;
  try {
    await waitFor("the other session to lock the row", () => psql(`SELECT count(*) FROM (SELECT id FROM ${table} WHERE id = 'held' FOR UPDATE SKIP LOCKED) s`) === "0");
    process.env["SEPP_TS_TEST_OUTBOX_URL"] = PG_URL;
    server = await TestServer.start(`
[[queues]]
name = "outboxed"

[[outboxes]]
name = "app-db"
dialect = "postgres"
url_env = "SEPP_TS_TEST_OUTBOX_URL"
table = "${table}"
poll_interval_ms = 200
`);
    client = await SeppClient.connect(server.addr);
    const c = client;
    // In one transaction, a row the relay makes a job of and one it can
    // never make one of (headers that are not a JSON object of strings),
    // which it moves to the dead table.
    psql(`BEGIN;
INSERT INTO ${table} (id, queue, job_type, payload, idempotency_key) VALUES ('ok-1', 'outboxed', 'receipt', '\\x7b7d', 'receipt-1');
INSERT INTO ${table} (id, queue, job_type, payload, headers) VALUES ('bad-1', 'outboxed', 'receipt', '\\x7b7d', '["not", "an object"]');
COMMIT;`);
    await waitFor("one row relayed and one dead", async () => {
      const [o] = await c.listOutboxes();
      return o?.relayed === 1n && o.dead === 1n;
    });
    const [o] = await c.listOutboxes();
    assert.ok(o);
    assert.equal(o.name, "app-db");
    assert.equal(o.dialect, "postgres");
    assert.equal(o.table, table);
    assert.equal(o.relayed, 1n);
    assert.equal(o.dead, 1n);
    assert.equal(o.lastError, "");
    assert.ok(o.checkedAt instanceof Date);
    assert.ok(Math.abs(o.checkedAt.getTime() - Date.now()) < 10_000, `checkedAt ${o.checkedAt.toISOString()} is now`);
    assert.ok(o.lagMs >= 600_000 && o.lagMs < 900_000, `lag ${o.lagMs} ms: the held row's ten minutes`);
    assert.equal(psql(`SELECT id FROM ${table}`), "held");
    assert.equal(psql(`SELECT id || ' ' || reason FROM ${table}_dead`), "bad-1 INVALID_FIELD");
    const look = await c.lookupIdempotencyKey("outboxed", "receipt-1");
    assert.equal(look.found, true);

    // The lock released, the relay takes the row and the lag drops to 0.
    holder.stdin.end("ROLLBACK;\n");
    assert.equal(await holderExit, 0);
    await waitFor("the held row relayed", async () => {
      const [x] = await c.listOutboxes();
      return x?.relayed === 2n && x.lagMs === 0;
    });
    assert.equal(psql(`SELECT count(*) FROM ${table}`), "0");
  } finally {
    if (holder.exitCode === null && holder.signalCode === null) holder.kill("SIGKILL");
    client?.close();
    await server?.stop();
    psql(`DROP SCHEMA ${schema} CASCADE`);
  }
});
