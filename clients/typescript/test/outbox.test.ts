// The outbox writer (sepp/outbox) against a real PostgreSQL: a schema of
// the test run's own at SEPP_TEST_POSTGRES_URL, holding the table `sepp
// outbox schema --dialect postgres` prints, dropped at the end. A committed
// row holds what was enqueued, a rolled-back one is gone, a row the server
// would refuse is refused before anything is written, and `sepp serve`
// relays committed rows into jobs. Without SEPP_TEST_POSTGRES_URL an
// unreachable database skips the tests; with it (CI sets it) they fail.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { randomBytes } from "node:crypto";
import pg from "pg";
import {
  SeppClient,
  IdempotencyKeyEmptyError,
  IdempotencyKeyTooLongError,
  InvalidFieldError,
  PayloadTooLargeError,
  SeppError,
  type EnqueueRequest,
} from "sepp";
import { enqueue, uuidv7 } from "sepp/outbox";
import { TestServer, packageDir, seppBin, waitFor } from "./server.js";

const PG_URL = process.env["SEPP_TEST_POSTGRES_URL"] || "postgres://root@127.0.0.1:5432/test?sslmode=disable";
const schema = `sepp_ts_outbox_${Date.now()}_${randomBytes(4).toString("hex")}`;
const table = `${schema}.sepp_outbox`;

/** Why PostgreSQL cannot be used, or undefined. With SEPP_TEST_POSTGRES_URL set, that is an error. */
let missing: string | undefined;
let admin: pg.Client | undefined;

before(async () => {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 10_000 });
  try {
    await c.connect();
  } catch (err) {
    const why = `PostgreSQL at ${PG_URL}: ${(err as Error).message}`;
    if (process.env["SEPP_TEST_POSTGRES_URL"]) throw new Error(why);
    missing = why;
    return;
  }
  admin = c;
  const ddl = execFileSync(seppBin(), ["outbox", "schema", "--dialect", "postgres", "--table", table], { encoding: "utf8" });
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.query(ddl);
});

after(async () => {
  if (!admin) return;
  await admin.query(`DROP SCHEMA ${schema} CASCADE`);
  await admin.end();
});

/** A connection of its own, as an app's transaction would have. */
async function connect(options?: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: PG_URL, options });
  await c.connect();
  return c;
}

async function rows(where = "TRUE", values: unknown[] = []): Promise<Array<Record<string, unknown>>> {
  const r = await admin!.query(
    `SELECT id, queue, job_type, payload, idempotency_key, headers, priority, max_attempts, run_at, created_at FROM ${table} WHERE ${where}`,
    values,
  );
  return r.rows as Array<Record<string, unknown>>;
}

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test("a committed row holds what was enqueued, column by column", async (t) => {
  if (missing) return t.skip(missing);
  const db = await connect();
  try {
    const payload = new Uint8Array([0x7b, 0x00, 0xff, 0x7d]); // any bytes, not only UTF-8
    const runAt = new Date("2031-05-06T07:08:09.123Z");
    await db.query("BEGIN");
    const full = await enqueue(
      db,
      {
        queue: "emails",
        jobType: "order_confirmation",
        payload,
        idempotencyKey: "order-42-confirmation",
        headers: { trace: "abc", "ключ": "значение" },
        priority: 5,
        maxAttempts: 3,
        runAt,
      },
      { table },
    );
    const bare = await enqueue(db, { queue: "emails", jobType: "ping" }, { table });
    await db.query("COMMIT");
    assert.match(full, UUID_V7);
    assert.match(bare, UUID_V7);
    assert.ok(full < bare, "ids made later sort later");

    const [a] = await rows("id = $1", [full]);
    assert.ok(a);
    assert.deepEqual(
      { ...a, created_at: undefined },
      {
        id: full,
        queue: "emails",
        job_type: "order_confirmation",
        payload: Buffer.from(payload),
        idempotency_key: "order-42-confirmation",
        headers: { trace: "abc", "ключ": "значение" },
        priority: 5,
        max_attempts: 3,
        run_at: runAt,
        created_at: undefined,
      },
    );
    assert.ok(a.created_at instanceof Date);
    const ms = parseInt(full.replaceAll("-", "").slice(0, 12), 16);
    assert.ok(Math.abs(ms - Date.now()) < 60_000, "the id starts with the time it was made");

    const [b] = await rows("id = $1", [bare]);
    assert.deepEqual(
      { ...b, created_at: undefined },
      {
        id: bare,
        queue: "emails",
        job_type: "ping",
        payload: Buffer.alloc(0),
        idempotency_key: null,
        headers: null,
        priority: 0,
        max_attempts: 0,
        run_at: null,
        created_at: undefined,
      },
    );
  } finally {
    await db.end();
  }
});

test("a rolled-back row is not there; an insert that fails names the table and keeps the driver's error", async (t) => {
  if (missing) return t.skip(missing);
  const db = await connect();
  try {
    await db.query("BEGIN");
    const id = await enqueue(db, { queue: "emails", jobType: "receipt", payload: "x" }, { table });
    assert.equal((await db.query(`SELECT count(*)::int AS n FROM ${table} WHERE id = $1`, [id])).rows[0].n, 1, "visible inside");
    await db.query("ROLLBACK");
    assert.deepEqual(await rows("id = $1", [id]), []);

    await assert.rejects(enqueue(db, { queue: "emails", jobType: "receipt" }, { table: `${schema}.no_such_table` }), (err: Error) => {
      assert.match(err.message, new RegExp(`^outbox: insert into ${schema}\\.no_such_table: `));
      assert.equal((err.cause as { code?: string }).code, "42P01");
      return true;
    });
    await assert.rejects(enqueue(db, { queue: "emails", jobType: "receipt" }, { table: "orders; DROP TABLE orders" }), /plain SQL identifier/);
    // The server's limit on the name, which its dead table and trigger extend.
    await assert.rejects(enqueue(db, { queue: "emails", jobType: "receipt" }, { table: "t".repeat(53) }), /at most 52 characters/);
    await assert.rejects(enqueue(db, { queue: "emails", jobType: "receipt" }, { table: "t".repeat(52) }), /^Error: outbox: insert into t{52}: /);
  } finally {
    await db.end();
  }
});

test("a row the server would refuse is refused before anything is written, with the server's reason", async (t) => {
  if (missing) return t.skip(missing);
  const ok: EnqueueRequest = { queue: "refusals", jobType: "receipt" };
  const manyHeaders = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`h${i}`, "v"]));
  const cases: Array<[string, EnqueueRequest, Record<string, number>, new (...a: never[]) => SeppError, string]> = [
    ["empty queue", { ...ok, queue: "" }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["queue of 256 bytes", { ...ok, queue: "q".repeat(256) }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["queue with a trailing space", { ...ok, queue: "refusals " }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["queue with a leading no-break space", { ...ok, queue: "\u00a0emails" }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["queue with a zero-width space", { ...ok, queue: "e\u200bmails" }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["queue with a NUL", { ...ok, queue: "e\u0000mails" }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["queue with a lone surrogate", { ...ok, queue: "e\ud800" }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["empty job type", { ...ok, jobType: "" }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["job type of 256 bytes", { ...ok, jobType: "é".repeat(128) }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["empty key", { ...ok, idempotencyKey: "" }, {}, IdempotencyKeyEmptyError, "IDEMPOTENCY_KEY_EMPTY"],
    ["key of 257 bytes", { ...ok, idempotencyKey: "k".repeat(257) }, {}, IdempotencyKeyTooLongError, "IDEMPOTENCY_KEY_TOO_LONG"],
    ["key over maxIdempotencyKeyBytes", { ...ok, idempotencyKey: "k".repeat(17) }, { maxIdempotencyKeyBytes: 16 }, IdempotencyKeyTooLongError, "IDEMPOTENCY_KEY_TOO_LONG"],
    ["key with a lone surrogate", { ...ok, idempotencyKey: "k\udc00" }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["payload over 1 MiB", { ...ok, payload: new Uint8Array((1 << 20) + 1) }, {}, PayloadTooLargeError, "PAYLOAD_TOO_LARGE"],
    ["payload over maxPayloadBytes", { ...ok, payload: "x".repeat(11) }, { maxPayloadBytes: 10 }, PayloadTooLargeError, "PAYLOAD_TOO_LARGE"],
    ["negative max attempts", { ...ok, maxAttempts: -1 }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["65 headers", { ...ok, headers: manyHeaders }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["headers over 64 KiB", { ...ok, headers: { big: "x".repeat(64 << 10) } }, {}, InvalidFieldError, "INVALID_FIELD"],
    ["a priority that is no 32-bit whole number", { ...ok, priority: 1.5 }, {}, InvalidFieldError, "INVALID_FIELD"],
  ];
  const db = await connect();
  try {
    await db.query("BEGIN");
    for (const [name, req, limits, cls, reason] of cases) {
      await assert.rejects(enqueue(db, req, { table, ...limits }), (err: unknown) => {
        assert.ok(err instanceof cls, `${name}: ${String(err)}`);
        assert.equal((err as SeppError).reason, reason, name);
        return true;
      });
    }
    // At the limits exactly: written.
    await enqueue(
      db,
      { queue: "q".repeat(255), jobType: "é".repeat(127) + "j", idempotencyKey: "k".repeat(256), payload: new Uint8Array(1 << 20), maxAttempts: 0 },
      { table },
    );
    await enqueue(db, { ...ok, idempotencyKey: "🧾:a/b c", headers: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`h${i}`, "v"])) }, { table });
    // Nothing refused reached the database, so the transaction is not aborted.
    const n = (await db.query(`SELECT count(*)::int AS n FROM ${table} WHERE queue = $1 OR queue = $2`, ["q".repeat(255), "refusals"])).rows[0].n;
    await db.query("COMMIT");
    assert.equal(n, 2);
  } finally {
    await db.end();
  }
});

test("without options the table is sepp_outbox, found on the search path", async (t) => {
  if (missing) return t.skip(missing);
  const db = await connect(`-c search_path=${schema}`);
  try {
    await db.query("BEGIN");
    const id = await enqueue(db, { queue: "reports", jobType: "daily" });
    await db.query("COMMIT");
    assert.equal((await rows("id = $1", [id]))[0]?.["job_type"], "daily");
  } finally {
    await db.end();
  }
});

test("examples/outbox.mjs commits its row", async (t) => {
  if (missing) return t.skip(missing);
  const { stdout } = await promisify(execFile)(process.execPath, ["examples/outbox.mjs", PG_URL], {
    cwd: packageDir,
    env: { ...process.env, PGOPTIONS: `-c search_path=${schema}` },
  });
  const m = /^committed outbox row (\S+)$/m.exec(stdout);
  assert.ok(m, stdout);
  const [row] = await rows("id = $1", [m[1]]);
  assert.deepEqual(
    [row?.["queue"], row?.["job_type"], String(row?.["payload"]), row?.["idempotency_key"]],
    ["emails", "order_confirmation", '{"order":42}', "order-42-confirmation"],
  );
});

test("sepp serve relays the committed rows into jobs, with their fields", async (t) => {
  if (missing) return t.skip(missing);
  const relayed = `${schema}.relayed`; // a table of its own: the relay deletes what it relays
  await admin!.query(execFileSync(seppBin(), ["outbox", "schema", "--dialect", "postgres", "--table", relayed], { encoding: "utf8" }));
  process.env["SEPP_TS_TEST_OUTBOX_URL"] = PG_URL;
  const server = await TestServer.start(`
[[outboxes]]
name = "app"
dialect = "postgres"
url_env = "SEPP_TS_TEST_OUTBOX_URL"
table = "${relayed}"
poll_interval_ms = 100
`);
  const db = await connect();
  const client = await SeppClient.connect(server.addr);
  try {
    const runAt = new Date(Date.now() + 3600_000);
    await db.query("BEGIN");
    const a = await enqueue(
      db,
      { queue: "relayed", jobType: "welcome", payload: new Uint8Array([1, 2, 255]), headers: { trace: "t-1" }, priority: 3, maxAttempts: 2 },
      { table: relayed },
    );
    await enqueue(db, { queue: "relayed", jobType: "receipt", idempotencyKey: "receipt-9", runAt }, { table: relayed });
    await db.query("COMMIT");
    // A row without a key is enqueued under its id.
    await waitFor("both rows relayed", async () => (await client.listOutboxes())[0]?.relayed === 2n);
    const jobOf = async (key: string) => client.getJob((await client.lookupIdempotencyKey("relayed", key)).jobId!);
    const j1 = await jobOf(a);
    assert.deepEqual(
      [j1.jobType, [...j1.payload], j1.headers, j1.priority, j1.maxAttempts],
      ["welcome", [1, 2, 255], { trace: "t-1" }, 3, 2],
    );
    const j2 = await jobOf("receipt-9");
    assert.deepEqual([j2.jobType, j2.state, j2.runAt?.getTime()], ["receipt", "scheduled", runAt.getTime()]);
    assert.equal((await admin!.query(`SELECT count(*)::int AS n FROM ${relayed}`)).rows[0].n, 0, "relayed rows are deleted");
  } finally {
    client.close();
    await db.end();
    await server.stop();
  }
});

test("uuidv7: version 7, variant 10, in the order made, the time in the first 48 bits", () => {
  const t0 = Date.now();
  const ids = Array.from({ length: 5000 }, () => uuidv7());
  const t1 = Date.now();
  for (const id of ids) assert.match(id, UUID_V7);
  assert.deepEqual([...ids].sort(), ids, "sorted as made, also within one millisecond");
  assert.equal(new Set(ids).size, ids.length);
  const ms = (id: string) => parseInt(id.replaceAll("-", "").slice(0, 12), 16);
  assert.ok(ms(ids[0]!) >= t0 && ms(ids.at(-1)!) <= t1 + 2);
});
