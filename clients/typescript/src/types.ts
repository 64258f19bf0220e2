/**
 * The plain types of the client API (requests, acks, jobs) and their
 * conversions to and from the generated messages in `gen/sepp/v1`.
 *
 * @module
 */
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import {
  JobHold as PbJobHold,
  JobState as PbJobState,
  type EnqueueRequestSchema,
  type EnqueueResponse,
  type Job as PbJob,
} from "./gen/sepp/v1/job_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ClaimOutcome } from "./gen/sepp/v1/effect_pb.js";
import type { SeppError } from "./errors.js";

/** Bytes, or a string sent as its UTF-8 bytes. */
export type BytesLike = Uint8Array | string;

/** One job to enqueue. Only `queue` and `jobType` are required. */
export interface EnqueueRequest {
  /** The queue: the scope of idempotency keys and of most settings. */
  queue: string;
  /** What kind of job this is; workers pick a handler by it. */
  jobType: string;
  /** Opaque bytes for the handler; a string is sent as UTF-8. Default empty. */
  payload?: BytesLike;
  /**
   * Makes the enqueue safe to retry: within the queue's dedup window an
   * enqueue with a recorded key creates nothing and returns the original job.
   * `undefined` (or `null`): no key. `""` is an error
   * ({@link IdempotencyKeyEmptyError}), never "no key": a script with an
   * unset variable must not make duplicates. 1 to 256 bytes of UTF-8.
   */
  idempotencyKey?: string | null;
  /** Higher runs first. Default 0. */
  priority?: number;
  /** Not before this time. Default: now. */
  runAt?: Date;
  /** Overrides the queue's `max_attempts`. Default 0: the queue's. */
  maxAttempts?: number;
  /** Free-form headers stored with the job. */
  headers?: Record<string, string>;
}

/** The server's answer to an enqueue (the "ack"). */
export interface Ack {
  /** The new job, or on a hit the original job (which may since have run, been dead-lettered or been deleted). */
  jobId: string;
  /** True when "this enqueue is already accounted for": the key was recorded and `jobId` names the original. */
  deduplicated: boolean;
  /** On a hit: the original was enqueued with a different job type or payload. */
  payloadMismatch: boolean;
  /** On a hit: when the original was enqueued. */
  originalEnqueuedAt?: Date;
  /** For keyed enqueues: when the key stops being honoured. */
  dedupExpiresAt?: Date;
  /** On a hit on a queue with `on_duplicate = "replace"` or `"debounce"`: the waiting original took this request (set only then). */
  replaced?: true;
  /**
   * The key the enqueue was judged by: the request's, or the one the server
   * derived from the payload on a queue with `key_fields` (look it up or
   * release it with this). Absent for an enqueue without a key.
   */
  idempotencyKey?: string;
  /**
   * On a queue with `when_running = "run_again"`: the key's job was running,
   * so this enqueue created a follow-up (`jobId`, `deduplicated` false) that
   * runs once the job named here has ended. Absent otherwise.
   */
  followsJobId?: string;
  /**
   * A `[[queues.rules]]` rule with `action = "delay"` found its window full:
   * the job was accepted for this time, the first moment the window has
   * room. Absent otherwise.
   */
  delayedUntil?: Date;
}

/** The outcome of one job of a batch: an ack, or the error that job got. */
export type BatchResult = { ok: true; ack: Ack; error?: undefined } | { ok: false; error: SeppError; ack?: undefined };

/**
 * What holds back a job whose run-at has come: `"follow_up"`, a follow-up
 * (`when_running = "run_again"`) waiting for the job it follows to end;
 * `"concurrency"`, its concurrency key is at its limit (or, on an ordered
 * queue, an earlier job of its key has not finished); `"rate"`, its rate key
 * had its limit of jobs reserved within the period.
 */
export type JobHold = "follow_up" | "concurrency" | "rate";

/** Where a job is in its lifecycle. `"deleted"`: the job is gone but its dedup record lives. */
export type JobState = "scheduled" | "available" | "reserved" | "completed" | "dead" | "cancelled" | "deleted" | "unknown";

/** A job as the server stores it. */
export interface Job {
  /** The job id (time-sortable, unique across nodes). */
  jobId: string;
  /** The queue it was enqueued to. */
  queue: string;
  /** What kind of job it is. */
  jobType: string;
  /** The payload, as enqueued. */
  payload: Uint8Array;
  /** The key it was enqueued with, if any. */
  idempotencyKey?: string;
  /** Higher runs first. */
  priority: number;
  /** Not before this time. */
  runAt?: Date;
  /** Attempts before the job is dead-lettered. */
  maxAttempts: number;
  /** Deliveries so far. */
  attempts: number;
  /** The headers it was enqueued with. */
  headers: Record<string, string>;
  /** Where it is in its lifecycle. */
  state: JobState;
  /** When it was enqueued. */
  createdAt?: Date;
  /** When the job reached completed, dead or cancelled. */
  finalizedAt?: Date;
  /** The result passed to complete, if any. */
  result: Uint8Array;
  /** The error of the last failed attempt, or why the job is dead. */
  lastError: string;
  /** A waiting follow-up (`when_running = "run_again"`): the job whose end it waits for. Absent otherwise. */
  followsJobId?: string;
  /**
   * The job's key under its queue's `[queues.concurrency]`: JSON of the key
   * fields' values. Absent on queues without one, and where the limit is the
   * whole queue's (no key fields).
   */
  concurrencyKey?: string;
  /** The job's key under its queue's `[queues.rate]`, as `concurrencyKey` is. */
  rateKey?: string;
  /** What holds back the job although its run-at has come; absent when nothing does. */
  heldBy?: JobHold;
  /** With `heldBy` `"rate"`: when its key's rate window has room again. */
  heldUntil?: Date;
}

/** What the server knows of an idempotency key. */
export interface KeyLookup {
  /** False when no live record exists: never enqueued, expired, or released. */
  found: boolean;
  /** The key looked up: the one given, or the one the server derived from the payload given. */
  idempotencyKey: string;
  /** The job the key names (empty when not found). */
  jobId: string;
  /** When the key was first enqueued. */
  firstEnqueuedAt?: Date;
  /** When the record stops being honoured. */
  expiresAt?: Date;
  /** Enqueues deduplicated against this record so far. */
  hits: bigint;
  /** The job's state now, or `"deleted"` when it is gone. */
  state: JobState;
  /** The job's result, if it completed with one. */
  result: Uint8Array;
}

/** The answer to a release of an idempotency key. */
export interface KeyRelease {
  /** False when there was no live record to release. */
  released: boolean;
  /** The job the released record pointed to. */
  jobId: string;
  /** The key released: the one given, or the one the server derived from the payload given. */
  idempotencyKey: string;
}

const encoder = new TextEncoder();

/**
 * `b` as bytes (a string as UTF-8).
 *
 * @param b - bytes or a string.
 */
export function toBytes(b: BytesLike | undefined | null): Uint8Array {
  if (b === undefined || b === null) return new Uint8Array(0);
  return typeof b === "string" ? encoder.encode(b) : b;
}

const decoder = new TextDecoder();

/**
 * The UTF-8 text of `b`.
 *
 * @param b - bytes.
 */
export function bytesToText(b: Uint8Array): string {
  return decoder.decode(b);
}

/** @internal */
export function dateOf(t: Timestamp | undefined): Date | undefined {
  return t ? timestampDate(t) : undefined;
}

const states: Record<number, JobState> = {
  [PbJobState.SCHEDULED]: "scheduled",
  [PbJobState.AVAILABLE]: "available",
  [PbJobState.RESERVED]: "reserved",
  [PbJobState.COMPLETED]: "completed",
  [PbJobState.DEAD]: "dead",
  [PbJobState.CANCELLED]: "cancelled",
  [PbJobState.DELETED]: "deleted",
};

/** @internal */
export function stateFromProto(s: PbJobState): JobState {
  return states[s] ?? "unknown";
}

/** @internal */
export function stateToProto(s: JobState | undefined): PbJobState {
  for (const [k, v] of Object.entries(states)) if (v === s) return Number(k) as PbJobState;
  return PbJobState.UNSPECIFIED;
}

/** @internal The request as the generated message's init shape (no checks). */
export function enqueueToProto(r: EnqueueRequest): MessageInitShape<typeof EnqueueRequestSchema> {
  const m: MessageInitShape<typeof EnqueueRequestSchema> = {
    queue: r.queue,
    jobType: r.jobType,
    payload: toBytes(r.payload),
    priority: r.priority ?? 0,
    maxAttempts: r.maxAttempts ?? 0,
    headers: r.headers ?? {},
  };
  // Presence matters: "" is sent as "", so the server can refuse it.
  if (r.idempotencyKey !== undefined && r.idempotencyKey !== null) m.idempotencyKey = r.idempotencyKey;
  if (r.runAt) m.runAt = timestampFromDate(r.runAt);
  return m;
}

/** @internal */
export function ackFromProto(r: EnqueueResponse | undefined): Ack {
  return {
    jobId: r?.jobId ?? "",
    deduplicated: r?.deduplicated ?? false,
    payloadMismatch: r?.payloadMismatch ?? false,
    originalEnqueuedAt: dateOf(r?.originalEnqueuedAt),
    dedupExpiresAt: dateOf(r?.dedupExpiresAt),
    ...(r?.replaced ? { replaced: true as const } : {}),
    ...(r?.idempotencyKey ? { idempotencyKey: r.idempotencyKey } : {}),
    ...(r?.followsJobId ? { followsJobId: r.followsJobId } : {}),
    ...(r?.delayedUntil ? { delayedUntil: timestampDate(r.delayedUntil) } : {}),
  };
}

const holds: Record<number, JobHold> = {
  [PbJobHold.FOLLOW_UP]: "follow_up",
  [PbJobHold.CONCURRENCY]: "concurrency",
  [PbJobHold.RATE]: "rate",
};

function holdFromProto(h: PbJobHold | undefined): JobHold | undefined {
  return h === undefined ? undefined : holds[h];
}

/** @internal */
export function jobFromProto(p: PbJob | undefined): Job {
  const heldBy = holdFromProto(p?.heldBy);
  return {
    jobId: p?.jobId ?? "",
    queue: p?.queue ?? "",
    jobType: p?.jobType ?? "",
    payload: p?.payload ?? new Uint8Array(0),
    idempotencyKey: p?.idempotencyKey,
    priority: p?.priority ?? 0,
    runAt: dateOf(p?.runAt),
    maxAttempts: p?.maxAttempts ?? 0,
    attempts: p?.attempts ?? 0,
    headers: { ...(p?.headers ?? {}) },
    state: stateFromProto(p?.state ?? PbJobState.UNSPECIFIED),
    createdAt: dateOf(p?.createdAt),
    finalizedAt: dateOf(p?.finalizedAt),
    result: p?.result ?? new Uint8Array(0),
    lastError: p?.lastError ?? "",
    ...(p?.followsJobId ? { followsJobId: p.followsJobId } : {}),
    ...(p?.concurrencyKey ? { concurrencyKey: p.concurrencyKey } : {}),
    ...(p?.rateKey ? { rateKey: p.rateKey } : {}),
    ...(heldBy ? { heldBy } : {}),
    ...(p?.heldUntil ? { heldUntil: timestampDate(p.heldUntil) } : {}),
  };
}

/** The answer to a claim of an effect key. */
export type EffectState = "acquired" | "completed" | "in_progress";

/** @internal */
export function effectStateFromProto(o: ClaimOutcome): EffectState {
  switch (o) {
    case ClaimOutcome.ACQUIRED:
      return "acquired";
    case ClaimOutcome.COMPLETED:
      return "completed";
  }
  return "in_progress";
}

/** Asks for jobs to work on. Most programs use {@link Worker}, which reserves, extends and reports for them. */
export interface ReserveRequest {
  /** Queues to reserve from, at least one. */
  queues: string[];
  /** Names the worker in logs and listings. */
  workerId?: string;
  /** The most jobs to lease at once. Default 1. */
  maxJobs?: number;
  /** How long each job is leased, in ms. Default 0: the queue's `lease_ms`. */
  leaseMs?: number;
  /** How long to wait for a job when none is ready (long poll), in ms. Default 0. */
  waitMs?: number;
}

/** One leased job. */
export interface Reservation {
  /** The job. */
  job: Job;
  /** Must accompany complete, fail and extendLease. */
  leaseToken: string;
  /** The deliveries of this job, this one included. */
  attempt: number;
  /** When the lease ends unless extended. */
  leaseExpiresAt?: Date;
  /** The length of the lease granted, in ms. */
  leaseMs: number;
}

/** Steers what happens to a failed job. */
export interface FailOptions {
  /** Replaces the queue's backoff for this retry, in ms. */
  retryAfterMs?: number;
  /** Dead-letters the job now, whatever its attempts. */
  permanent?: boolean;
}

/** What became of a failed job. */
export interface FailResult {
  /** `"scheduled"` (retried at `nextRunAt`) or `"dead"`. */
  state: JobState;
  /** When the retry runs (scheduled only). */
  nextRunAt?: Date;
  /** True when this Fail had been committed before (a resent call whose first answer was lost): nothing changed. */
  alreadyFailed: boolean;
}

/** One job to complete in a completeBatch. */
export interface Completion {
  /** The job. */
  jobId: string;
  /** The token that holds its lease. */
  leaseToken: string;
  /** Stored as the job's result. */
  result?: BytesLike;
}

/** Claims an effect key. Most programs use {@link Effects.do}, which claims, extends, completes and releases. */
export interface ClaimEffectRequest {
  /** 1 to 256 bytes of UTF-8. */
  scope: string;
  /** 1 to 256 bytes of UTF-8; name the effect ("order-9.invoice"), not the delivery. */
  key: string;
  /** How long the completed record lives, in ms. Default 0: 24 h. */
  ttlMs?: number;
  /** How long the claim holds without an extension, in ms. Default 0: 30 s. */
  leaseMs?: number;
  /** How long the server waits for another holder to finish, in ms. Default 0: answer at once. */
  waitMs?: number;
}

/** The answer to claimEffect. */
export interface EffectClaim {
  /** Acquired (run the effect), completed (replay `result`) or in progress elsewhere. */
  state: EffectState;
  /** Holds the claim (`"acquired"`). */
  token: string;
  /** The stored result (`"completed"`). */
  result: Uint8Array;
  /** When the claim ends unless extended. */
  leaseExpiresAt?: Date;
}

/** What the server knows of an effect key. */
export interface EffectRecord {
  /** Whether a record exists. */
  found: boolean;
  /** Completed, or in progress (held by someone). */
  state?: EffectState;
  /** The stored result, once completed. */
  result: Uint8Array;
  /** When the effect completed. */
  completedAt?: Date;
  /** When the completed record goes away. */
  expiresAt?: Date;
}

/** A queue with its counts, as listQueues returns it. */
export interface QueueInfo {
  /** The queue's name. */
  name: string;
  /** Jobs waiting for their run-at or a retry. */
  scheduled: bigint;
  /** Jobs ready to be reserved. */
  available: bigint;
  /** Jobs leased to workers. */
  reserved: bigint;
  /** Completed jobs not yet deleted by retention. */
  completed: bigint;
  /** Dead-lettered jobs. */
  dead: bigint;
  /** Cancelled jobs. */
  cancelled: bigint;
  /** Live dedup records (inside their window). */
  dedupRecords: bigint;
  /** Delivery is paused (enqueues still work). */
  paused: boolean;
  /**
   * Jobs whose run-at has come that are held back (counted in `scheduled`):
   * follow-ups waiting for the job they follow (`when_running = "run_again"`).
   */
  heldFollowUp: bigint;
  /** Jobs held back by their key's `[queues.concurrency]` limit (counted in `scheduled`). */
  heldConcurrency: bigint;
  /** Jobs held back by their key's `[queues.rate]` (counted in `scheduled`). */
  heldRate: bigint;
}

/**
 * An `[[outboxes]]` table as the server's relay last saw it, as
 * listOutboxes returns it. The counts are this server's since it started.
 */
export interface OutboxInfo {
  /** The outbox's name from the config (`name`), as in logs and metrics. */
  name: string;
  /** The app database's dialect: `"postgres"`, `"mysql"` or `"sqlite"`. */
  dialect: string;
  /** The outbox table, as configured (optionally `schema.table`). */
  table: string;
  /**
   * The age of the oldest row not yet relayed, in milliseconds, at
   * `checkedAt`, by the app database's clock; 0 when the table was empty.
   */
  lagMs: number;
  /** Rows relayed into jobs (created, or a hit on the job an earlier pass made). */
  relayed: bigint;
  /** Rows refused for good and moved to the dead table (`<table>_dead`). */
  dead: bigint;
  /** When the relay last read the table; undefined before its first read. */
  checkedAt?: Date;
  /**
   * The last relay pass's error (the database unreachable, Sepp refusing for
   * a while); empty when the last pass succeeded.
   */
  lastError: string;
}

/** Selects dead jobs by queue, by id, or all of them. */
export interface DeadJobs {
  /** The dead jobs of this queue. */
  queue?: string;
  /** These dead jobs. */
  jobIds?: string[];
  /** Every dead job. */
  all?: boolean;
}

/**
 * A `[[schedules]]` entry of the server's config and where it stands, as
 * listSchedules returns it. `lastTick` is shared by every node of the
 * server's store; `lastJobId` and `lastError` are the answering node's.
 */
export interface ScheduleInfo {
  /** The schedule's name from the config, as in its jobs' keys and metrics. */
  name: string;
  /** As configured: five cron fields, a descriptor like `"@hourly"`, or `"@every 30s"`. */
  cron: string;
  /** The IANA zone the cron fields are read in (`"UTC"` when not set). */
  timezone: string;
  /** The queue of the tick's jobs. */
  queue: string;
  /** The job type of the tick's jobs. */
  jobType: string;
  /** `"none"`, `"last"` or `"all"`: what is fired of the ticks missed while no node ran. */
  catchUp: string;
  /**
   * The latest tick whose job exists, enqueued by any node; its job's key is
   * `schedule:<name>:<tick in UTC, RFC 3339>`. Undefined before the first.
   */
  lastTick?: Date;
  /** The next tick to fire. */
  nextTick?: Date;
  /** The job of the latest tick the answering node fired; empty when it fired none. */
  lastJobId: string;
  /** The answering node's last error firing a tick; empty after a success. */
  lastError: string;
}
