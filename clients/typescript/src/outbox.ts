/**
 * The outbox writer: writes a job as a row of the app's own PostgreSQL
 * table `sepp_outbox`, inside the app's own transaction, for Sepp to relay:
 * the job exists if and only if the transaction commits.
 *
 * ```ts
 * import { enqueue } from "sepp/outbox";
 *
 * const db = await pool.connect(); // a pg PoolClient (or Client)
 * try {
 *   await db.query("BEGIN");
 *   await db.query("INSERT INTO orders (id, total) VALUES ($1, $2)", [orderId, total]);
 *   const rowId = await enqueue(db, { queue: "emails", jobType: "order_confirmation", payload: JSON.stringify({ orderId }) });
 *   await db.query("COMMIT");
 * } catch (err) {
 *   await db.query("ROLLBACK");
 *   throw err;
 * } finally {
 *   db.release();
 * }
 * ```
 *
 * `sepp outbox schema --dialect postgres` prints the table's DDL; `sepp
 * serve` relays the rows of each database named in the config's
 * `[[outboxes]]` into jobs, once per row, and deletes them. A row without
 * an idempotency key is enqueued with its id as the key (unless the queue
 * derives keys from the payload).
 *
 * The writer checks a row as the server checks an enqueue (queue and job
 * type names, key, payload and header sizes) and throws the server's error
 * ({@link InvalidFieldError}, {@link PayloadTooLargeError}, ...), so a
 * mistake fails the caller's transaction instead of reaching the dead table
 * later. This mirrors the Go package `github.com/sepp-dev/sepp/outbox`.
 * It needs no import of `pg`: any object with pg's `query(text, values)`
 * will do.
 *
 * @module
 */
import {
  IdempotencyKeyEmptyError,
  IdempotencyKeyTooLongError,
  InvalidFieldError,
  PayloadTooLargeError,
  Reason,
} from "./errors.js";
import { DEFAULT_MAX_KEY_BYTES, isWellFormed, utf8Length } from "./keys.js";
import { toBytes, type EnqueueRequest } from "./types.js";

/** The outbox table's name unless one is given. */
export const DEFAULT_TABLE = "sepp_outbox";

/** The server's default `max_payload_bytes`: 1 MiB. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20;

/** The longest queue name and job type, in UTF-8 bytes. */
const MAX_NAME_BYTES = 255;
/** The most headers a job may carry. */
const MAX_HEADER_ENTRIES = 64;
/** The most bytes of header names and values a job may carry. */
const MAX_HEADER_BYTES = 64 << 10;
const INT32_MAX = 2 ** 31 - 1;

/**
 * What {@link enqueue} writes through: a pg `Client` or `PoolClient` on
 * which the caller ran `BEGIN` (a `Pool` would write outside the
 * transaction, which is not what an outbox is for).
 */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/** Options of {@link enqueue}. */
export interface OutboxOptions {
  /** The outbox table, optionally schema-qualified (`"app.sepp_outbox"`), at most 52 characters. Default `"sepp_outbox"`. */
  table?: string;
  /** The server's `max_payload_bytes`, when changed from its default (1 MiB). */
  maxPayloadBytes?: number;
  /** The server's `max_idempotency_key_bytes`, when changed from its default (256). */
  maxIdempotencyKeyBytes?: number;
}

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/;

/**
 * Writes `req` as a row of the outbox table through `client`, inside the
 * transaction the caller began on it, and returns the row's id, a UUIDv7.
 *
 * @param client - a pg Client or PoolClient inside a transaction.
 * @param req - the job, as for `client.enqueue`.
 * @param options - the table and the server's limits.
 * @returns the row's id.
 * @throws {@link InvalidFieldError}, {@link IdempotencyKeyEmptyError},
 *   {@link IdempotencyKeyTooLongError} or {@link PayloadTooLargeError} for a
 *   row the server would refuse (nothing is written); the driver's error,
 *   as the `cause` of an Error naming the table, when the insert fails.
 */
export async function enqueue(client: Queryable, req: EnqueueRequest, options: OutboxOptions = {}): Promise<string> {
  const table = options.table ?? DEFAULT_TABLE;
  if (typeof table !== "string" || !TABLE_NAME.test(table) || table.length > 52) {
    // The server's rule: the name is spliced into statements, and the
    // dead table's and the trigger's names add to it.
    throw new Error(
      `outbox: table: must be a plain SQL identifier of at most 52 characters (letters, digits, _; optionally schema.table), got ${JSON.stringify(table)}`,
    );
  }
  const payload = check(req, options);
  const id = uuidv7();
  const key = req.idempotencyKey ?? null;
  const headers = req.headers && Object.keys(req.headers).length > 0 ? JSON.stringify(req.headers) : null;
  const runAt = req.runAt ?? null;
  const query =
    `INSERT INTO ${table} (id, queue, job_type, payload, idempotency_key, headers, priority, max_attempts, run_at) ` +
    "VALUES ($1, $2, $3, $4, $5, ($6::text)::jsonb, $7, $8, $9)";
  try {
    await client.query(query, [id, req.queue, req.jobType, payload, key, headers, req.priority ?? 0, req.maxAttempts ?? 0, runAt]);
  } catch (err) {
    throw new Error(`outbox: insert into ${table}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  return id;
}

function invalid(field: string, message: string): InvalidFieldError {
  return new InvalidFieldError(Reason.InvalidField, `${field}: ${message}`, { metadata: { field } });
}

/** Unicode control (Cc) and format (Cf) characters, line and paragraph separators: not allowed in names. */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/** The server's check of a queue name (internal/config CheckQueueName). */
function checkQueueName(name: unknown): string | undefined {
  if (typeof name !== "string") return `must be a string, not ${typeof name}`;
  if (name === "") return "must not be empty";
  const n = utf8Length(name);
  if (n > MAX_NAME_BYTES) return `is ${n} bytes; the limit is ${MAX_NAME_BYTES}`;
  if (!isWellFormed(name)) return "is not valid UTF-8";
  if (/^\p{White_Space}|\p{White_Space}$/u.test(name)) return `${JSON.stringify(name)} has leading or trailing spaces`;
  const m = INVISIBLE.exec(name);
  if (m) {
    const cp = m[0].codePointAt(0)!;
    const kind = /\p{Cc}/u.test(m[0]) ? "control character" : /\p{Cf}/u.test(m[0]) ? "invisible format character" : "line or paragraph separator";
    const at = utf8Length(name.slice(0, m.index));
    return `${JSON.stringify(name)} contains the ${kind} U+${cp.toString(16).toUpperCase().padStart(4, "0")} at byte ${at}; names may hold only visible characters`;
  }
  return undefined;
}

/** Checks req as the server checks an enqueue; returns the payload's bytes. */
function check(req: EnqueueRequest, o: OutboxOptions): Uint8Array {
  if (req === null || typeof req !== "object") throw invalid("request", "want an object { queue, jobType, ... }");
  const q = checkQueueName(req.queue);
  if (q) throw invalid("queue", q);
  const jt = req.jobType as unknown;
  if (typeof jt !== "string") throw invalid("job_type", `must be a string, not ${typeof jt}`);
  if (jt === "") throw invalid("job_type", "is required");
  if (utf8Length(jt) > MAX_NAME_BYTES) throw invalid("job_type", `is ${utf8Length(jt)} bytes; the limit is ${MAX_NAME_BYTES}`);
  if (!isWellFormed(jt)) throw invalid("job_type", "is not valid UTF-8");

  if (req.idempotencyKey !== undefined && req.idempotencyKey !== null) {
    const k = req.idempotencyKey as unknown;
    const max = o.maxIdempotencyKeyBytes && o.maxIdempotencyKeyBytes > 0 ? o.maxIdempotencyKeyBytes : DEFAULT_MAX_KEY_BYTES;
    if (typeof k !== "string") throw invalid("idempotency_key", `must be a string, not ${typeof k}`);
    if (k === "") {
      throw new IdempotencyKeyEmptyError(
        Reason.IdempotencyKeyEmpty,
        "idempotency key is empty (often an unset variable): pass a key derived from what the job is about, or leave idempotencyKey undefined and the row's id becomes the key",
      );
    }
    if (!isWellFormed(k)) throw invalid("idempotency_key", "is not valid UTF-8; keys are UTF-8 strings");
    const n = utf8Length(k);
    if (n > max) {
      throw new IdempotencyKeyTooLongError(
        Reason.IdempotencyKeyTooLong,
        `idempotency key is ${n} bytes; the limit is ${max} (max_idempotency_key_bytes): use a shorter, stable id such as the entity or event id`,
      );
    }
  }

  const p = req.payload as unknown;
  if (p !== undefined && p !== null && typeof p !== "string" && !(p instanceof Uint8Array)) {
    throw invalid("payload", `must be a Uint8Array or a string, not ${typeof p}`);
  }
  const payload = toBytes(req.payload);
  const maxPayload = o.maxPayloadBytes && o.maxPayloadBytes > 0 ? o.maxPayloadBytes : DEFAULT_MAX_PAYLOAD_BYTES;
  if (payload.length > maxPayload) {
    throw new PayloadTooLargeError(
      Reason.PayloadTooLarge,
      `payload is ${payload.length} bytes; the limit is ${maxPayload} (max_payload_bytes): store large data elsewhere and enqueue a reference`,
    );
  }

  const ma = req.maxAttempts ?? 0;
  if (!Number.isInteger(ma) || ma > INT32_MAX) throw invalid("max_attempts", `must be a whole number, got ${ma}`);
  if (ma < 0) throw invalid("max_attempts", `must be >= 0 (0 means the queue's max_attempts), got ${ma}`);
  const pr = req.priority ?? 0;
  if (!Number.isInteger(pr) || pr < -INT32_MAX - 1 || pr > INT32_MAX) throw invalid("priority", `must be a 32-bit whole number, got ${pr}`);
  if (req.runAt !== undefined && req.runAt !== null && !(req.runAt instanceof Date && !Number.isNaN(req.runAt.getTime()))) {
    throw invalid("run_at", "must be a valid Date");
  }

  const h = req.headers as unknown;
  if (h !== undefined && h !== null) {
    if (typeof h !== "object" || Array.isArray(h)) throw invalid("headers", "must be an object of strings");
    const entries = Object.entries(h as Record<string, unknown>);
    if (entries.length > MAX_HEADER_ENTRIES) throw invalid("headers", `has ${entries.length} entries; the limit is ${MAX_HEADER_ENTRIES}`);
    let size = 0;
    for (const [k, v] of entries) {
      if (typeof v !== "string") throw invalid("headers", `${JSON.stringify(k)} must be a string, not ${typeof v}`);
      size += utf8Length(k) + utf8Length(v);
      if (!isWellFormed(k) || !isWellFormed(v)) throw invalid("headers", `${JSON.stringify(k)} is not valid UTF-8`);
    }
    if (size > MAX_HEADER_BYTES) {
      throw invalid("headers", `are ${size} bytes in all; the limit is ${MAX_HEADER_BYTES}: put large data in the payload`);
    }
  }
  // pg sends a Buffer as bytea.
  return Buffer.from(payload.buffer, payload.byteOffset, payload.length);
}

let lastMs = 0;
let seq = 0;

/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix time in ms, then a 12-bit counter
 * that keeps the ids made by this process in order within a millisecond,
 * then 62 random bits.
 */
export function uuidv7(): string {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  let ms = Date.now();
  if (ms > lastMs) {
    lastMs = ms;
    seq = ((b[6]! << 8) | b[7]!) & 0x7ff; // a random start with room to count up
  } else {
    ms = lastMs;
    if (++seq > 0xfff) {
      ms = ++lastMs;
      seq = ((b[6]! << 8) | b[7]!) & 0x7ff;
    }
  }
  for (let i = 5; i >= 0; i--) {
    b[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  b[6] = 0x70 | (seq >> 8);
  b[7] = seq & 0xff;
  b[8] = 0x80 | (b[8]! & 0x3f);
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
