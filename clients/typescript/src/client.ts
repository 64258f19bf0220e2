/**
 * The Sepp client: connect, enqueue (one job, a batch), read jobs, look up
 * and release idempotency keys, and the worker and effect calls that
 * `Worker` and `Effects` build on. Those two depend on this
 * module, never the reverse: make them with the client,
 * `new Effects(client)`, `new Worker(client, options)`.
 *
 * ```ts
 * import { SeppClient } from "sepp";
 *
 * const client = await SeppClient.connect("http://localhost:50051");
 * const ack = await client.enqueue({ queue: "emails", jobType: "receipt", idempotencyKey: "receipt-order-8a3f" });
 * // ack.deduplicated: the key was already recorded; ack.jobId names the original job.
 * ```
 *
 * A client is safe to share. Concurrent `enqueue` calls are coalesced into
 * EnqueueBatch RPCs (natural batching: an idle client sends at once; while
 * the RPCs in flight are busy, the next calls gather and go together when one
 * returns), and each caller still gets its own ack or error. A keyed enqueue
 * whose fate is unknown after a transport error is resent with the same key,
 * which makes the retry harmless; an unkeyed one is never resent. Every
 * resend waits the delay of the retry policy all Sepp clients share
 * ({@link retryDelay}).
 *
 * @module
 */
import { Code, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import type { EnqueueBatchResult, LookupIdempotencyKeyRequestSchema, ReleaseIdempotencyKeyRequestSchema } from "./gen/sepp/v1/job_pb.js";
import { JobService } from "./gen/sepp/v1/job_pb.js";
import { WorkerService } from "./gen/sepp/v1/worker_pb.js";
import { EffectService } from "./gen/sepp/v1/effect_pb.js";
import { AdminService } from "./gen/sepp/v1/admin_pb.js";
import { HealthService, SERVING } from "./health.js";
import {
  InternalError,
  InvalidFieldError,
  isRetryable,
  newSeppError,
  NotDeadError,
  Reason,
  SeppError,
  toSeppError,
  UnavailableError,
} from "./errors.js";
import { checkIdempotencyKey, DEFAULT_MAX_KEY_BYTES, isWellFormed } from "./keys.js";
import {
  ackFromProto,
  dateOf,
  effectStateFromProto,
  enqueueToProto,
  jobFromProto,
  stateFromProto,
  stateToProto,
  toBytes,
  type Ack,
  type BatchResult,
  type ClaimEffectRequest,
  type Completion,
  type DeadJobs,
  type EffectClaim,
  type EffectRecord,
  type EnqueueRequest,
  type FailOptions,
  type FailResult,
  type Job,
  type JobState,
  type KeyLookup,
  type KeyRelease,
  type OutboxInfo,
  type ScheduleInfo,
  type QueueInfo,
  type Reservation,
  type ReserveRequest,
  type BytesLike,
} from "./types.js";
import { Batcher, type BatchingOptions, type EnqueueInit } from "./batcher.js";
import { DEFAULT_RETRIES, retryDelay } from "./retry.js";
import { tracedEnqueue } from "./tracing.js";
import type { MessageInitShape } from "@bufbuild/protobuf";

export type { BatchingOptions } from "./batcher.js";

/** TLS settings for `https://` addresses (Node only; browsers use their own trust store). */
export interface TlsOptions {
  /** CA certificates (PEM) to trust instead of the system's. */
  ca?: string | string[];
  /** Client certificate (PEM) for mutual TLS. */
  cert?: string;
  /** Client private key (PEM) for mutual TLS. */
  key?: string;
  /** Set false only for tests against a self-signed server. Default true. */
  rejectUnauthorized?: boolean;
  /** The server name to verify, when it differs from the address's host. */
  servername?: string;
}

/**
 * Tunes the resending of requests whose fate a transport error left unknown.
 * Only the count can be tuned: the delays are the retry policy every Sepp
 * client shares ({@link retryDelay}), so that all of them load a server that
 * comes back the same way.
 */
export interface RetryOptions {
  /** How many resends may follow the first try. Default 5. */
  maxRetries?: number;
}

/** The wire protocol of the default transport. */
export type Protocol = "grpc" | "connect" | "connect-json" | "grpc-web";

/** Options of {@link SeppClient.connect}. Every field is optional. */
export interface ConnectOptions {
  /** Sent as `Authorization: Bearer <token>` on every call, for a server with `[auth]`. */
  token?: string;
  /** More headers sent on every call. */
  headers?: Record<string, string>;
  /**
   * A ready-made connect-es transport (its own TLS, HTTP version, protocol,
   * fetch). The address is then only used in messages; `token` and
   * `headers` still apply, `tls`, `protocol` and `interceptors` belong to
   * the transport you build.
   */
  transport?: Transport;
  /**
   * The protocol of the default transport. Node default `"grpc"` (binary,
   * HTTP/2); browser default `"connect-json"` (Connect protocol, JSON, fetch).
   */
  protocol?: Protocol;
  /** TLS for `https://` addresses (Node). */
  tls?: TlsOptions;
  /** connect-es interceptors, run on every call. */
  interceptors?: Interceptor[];
  /** Natural batching of concurrent enqueues: `false` turns it off (one RPC per enqueue). Default on. */
  batching?: boolean | BatchingOptions;
  /**
   * Resending after transport errors (of keyed enqueues, and of Complete,
   * Fail and CompleteEffect): how many resends may follow the first try, or
   * `false` for none. Default 5, each after a full-jitter delay under a
   * ceiling doubling from 50 ms to 2 s ({@link retryDelay}).
   */
  retries?: boolean | number | RetryOptions;
  /**
   * The key length checked before sending, in UTF-8 bytes. Set it to the
   * server's `max_idempotency_key_bytes` if you change that. Default 256.
   */
  maxIdempotencyKeyBytes?: number;
  /**
   * Check keys locally before sending (empty, too long, not UTF-8), so that a
   * bad key fails fast and sends nothing. `false` sends every key as it is
   * and lets the server refuse it. Default true.
   */
  checkKeys?: boolean;
  /** Timeout of each RPC, in ms (long polls add their wait). Default 30000. */
  timeoutMs?: number;
  /** Call the server's health check in connect() so an unreachable server fails there. Default true. */
  healthCheck?: boolean;
}

/** Per-call options. */
export interface CallOptions {
  /** Abort the call (the job of an aborted enqueue may still have been written). */
  signal?: AbortSignal;
}

/** Options of {@link SeppClient.enqueueBatch}. */
export interface BatchOptions extends CallOptions {
  /** All jobs are validated first and written together, or none is. A dedup hit is not a failure. */
  atomic?: boolean;
}

/** Options of {@link SeppClient.pauseQueue} and {@link SeppClient.resumeQueue}. */
export interface PauseOptions extends CallOptions {
  /**
   * Pause (or resume) a queue the server does not know: one neither declared
   * in `[[queues]]` nor holding jobs (none `listQueues` lists). Without it,
   * the default, the server refuses such a queue with an
   * {@link UnknownQueueError}, as most likely a mistyped name. Set it to
   * pause a queue before its first job. Default false.
   */
  create?: boolean;
}

/**
 * Builds the default transport for an address. Each entry point (`sepp` for
 * Node, `sepp/browser`) registers its own.
 */
export type TransportFactory = (
  baseUrl: string,
  options: ConnectOptions,
  interceptors: Interceptor[],
) => Transport | { transport: Transport; close(): void };

let defaultTransportFactory: TransportFactory | undefined;

/**
 * Registers the transport factory used when `ConnectOptions.transport` is not
 * given. The package's entry points call this; you need it only for a custom
 * runtime.
 *
 * @param f - the factory.
 */
export function setDefaultTransportFactory(f: TransportFactory): void {
  defaultTransportFactory = f;
}

interface ResolvedConfig {
  batching: Required<BatchingOptions> | undefined;
  maxRetries: number;
  maxKeyBytes: number;
  checkKeys: boolean;
  timeoutMs: number;
}

function resolveConfig(o: ConnectOptions): ResolvedConfig {
  const b = o.batching === false ? undefined : typeof o.batching === "object" ? o.batching : {};
  let r: RetryOptions;
  if (o.retries === false) r = { maxRetries: 0 };
  else if (typeof o.retries === "number") r = { maxRetries: o.retries };
  else if (typeof o.retries === "object") r = o.retries;
  else r = {};
  return {
    batching: b && {
      maxInFlight: Math.max(1, b.maxInFlight ?? 2),
      maxBatchSize: Math.max(1, b.maxBatchSize ?? 1000),
      maxBatchBytes: Math.max(1, b.maxBatchBytes ?? 4 << 20),
    },
    maxRetries: Math.max(0, r.maxRetries ?? DEFAULT_RETRIES),
    maxKeyBytes: o.maxIdempotencyKeyBytes ?? DEFAULT_MAX_KEY_BYTES,
    checkKeys: o.checkKeys ?? true,
    timeoutMs: o.timeoutMs ?? 30_000,
  };
}

/** The message of an address that cannot be used. */
function normalizeAddress(addr: string): string {
  let u: URL;
  try {
    u = new URL(addr.includes("://") ? addr : `http://${addr}`);
  } catch {
    throw new InvalidFieldError(Reason.InvalidField, `address ${JSON.stringify(addr)}: want http://host:port`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new InvalidFieldError(Reason.InvalidField, `address ${JSON.stringify(addr)}: scheme ${u.protocol} is not supported; use http://host:port or https://host:port`);
  }
  return u.origin + u.pathname.replace(/\/+$/, "");
}

/** The lookup/release key limit: the configured one, but never below a content-derived key's 64 hex digits. */
function lookupKeyLimit(limit: number): number {
  return limit <= 0 ? limit : Math.max(limit, 64);
}

/** Sleeps `ms`, or until `signal` aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * A connection to one Sepp server (or a load balancer in front of several).
 * Create it with {@link SeppClient.connect}.
 */
export class SeppClient {
  /** The generated connect-es client of JobService, for anything this class does not wrap. */
  readonly jobs: Client<typeof JobService>;
  /** The generated connect-es client of WorkerService. */
  readonly workers: Client<typeof WorkerService>;
  /** The generated connect-es client of EffectService. */
  readonly effects: Client<typeof EffectService>;
  /** The generated connect-es client of AdminService. */
  readonly admin: Client<typeof AdminService>;
  /** The server's address. */
  readonly address: string;
  private readonly cfg: ResolvedConfig;
  private readonly batcher: Batcher | undefined;
  private readonly transport: Transport;
  private readonly closeTransport: (() => void) | undefined;
  private closed = false;

  private constructor(address: string, inner: Transport, cfg: ResolvedConfig, close?: () => void) {
    this.address = address;
    const closedError = () =>
      new UnavailableError(Reason.Unavailable, `the client of ${address} is closed`);
    // Every call goes through here, so none is sent after close().
    const transport: Transport = {
      unary: (...a) => (this.closed ? Promise.reject(closedError()) : inner.unary(...a)),
      stream: (...a) => (this.closed ? Promise.reject(closedError()) : inner.stream(...a)),
    };
    this.transport = transport;
    this.closeTransport = close;
    this.cfg = cfg;
    this.jobs = createClient(JobService, transport);
    this.workers = createClient(WorkerService, transport);
    this.effects = createClient(EffectService, transport);
    this.admin = createClient(AdminService, transport);
    // The batcher gets the two functions it needs, not the client: it sits
    // below the client and never calls back into it.
    this.batcher = cfg.batching
      ? new Batcher(
          (reqs, signal) => this.sendEnqueues(reqs, signal),
          (err, retry, signal) => this.shouldRetry(true, err, retry, signal),
          cfg.batching,
        )
      : undefined;
  }

  /**
   * Connects to the server at `address` (`"http://localhost:50051"`) and
   * checks that it answers (unless `options.healthCheck` is false).
   *
   * @param address - `http://host:port` or `https://host:port`.
   * @param options - token, transport, TLS, batching, retries, limits.
   * @throws {@link UnavailableError} when the server cannot be reached.
   */
  static async connect(address: string, options: ConnectOptions = {}): Promise<SeppClient> {
    const baseUrl = normalizeAddress(address);
    const fixed: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.token !== undefined) fixed["authorization"] = `Bearer ${options.token}`;
    let transport: Transport;
    let close: (() => void) | undefined;
    if (options.transport) {
      transport = Object.keys(fixed).length > 0 ? withHeaders(options.transport, fixed) : options.transport;
    } else {
      const interceptors: Interceptor[] = [];
      if (Object.keys(fixed).length > 0) {
        interceptors.push((next) => (req) => {
          for (const [k, v] of Object.entries(fixed)) req.header.set(k, v);
          return next(req);
        });
      }
      interceptors.push(...(options.interceptors ?? []));
      if (!defaultTransportFactory) {
        throw new InvalidFieldError(Reason.InvalidField, "no default transport is registered: import from \"sepp\" (Node) or \"sepp/browser\", or pass options.transport");
      }
      const made = defaultTransportFactory(baseUrl, options, interceptors);
      if ("transport" in made) {
        transport = made.transport;
        close = () => made.close();
      } else {
        transport = made;
      }
    }
    const client = new SeppClient(baseUrl, transport, resolveConfig(options), close);
    if (options.healthCheck ?? true) {
      try {
        await client.checkHealth();
      } catch (err) {
        client.close();
        throw err;
      }
    }
    return client;
  }

  /**
   * Closes the client: later calls fail with an {@link UnavailableError} and
   * are not retried, and the HTTP/2 connection (Node, gRPC) is closed, so
   * calls in flight fail too. A process may also just exit: the connection
   * never keeps it alive. A transport of your own is yours to close.
   */
  close(): void {
    this.closed = true;
    this.closeTransport?.();
  }

  /**
   * Calls the server's health check (grpc.health.v1.Health/Check).
   *
   * @throws {@link UnavailableError} when the server cannot be reached or is not serving.
   */
  async checkHealth(options: CallOptions = {}): Promise<void> {
    const method = HealthService.methods[0]!;
    let status: unknown;
    try {
      const res = await this.transport.unary(method as never, options.signal, this.cfg.timeoutMs, undefined, {} as never);
      status = (res.message as { status?: number }).status;
    } catch (err) {
      const e = toSeppError(err);
      throw new UnavailableError(Reason.Unavailable, `cannot reach the Sepp server at ${this.address}: ${e.rawMessage}`, {
        code: e.code,
        cause: err,
      });
    }
    if (status !== SERVING) {
      throw new UnavailableError(Reason.Unavailable, `the Sepp server at ${this.address} is not serving (health status ${String(status)})`);
    }
  }

  /**
   * Enqueues one job. With an idempotency key, an enqueue of a key already
   * recorded on the queue within its dedup window creates nothing and returns
   * the original job with `deduplicated: true`.
   *
   * The key is checked locally first (1..256 UTF-8 bytes; `""` is an error,
   * not "no key"): a bad key throws before anything is sent. A keyed enqueue
   * is resent with its key after a transport error; an unkeyed one is not.
   *
   * @param request - the job.
   * @param options - an abort signal.
   * @returns the ack: `jobId`, `deduplicated`, ...
   * @throws a {@link SeppError} subclass per reason, e.g. {@link IdempotencyKeyTooLongError}.
   */
  async enqueue(request: EnqueueRequest, options: CallOptions = {}): Promise<Ack> {
    const pb = this.prepare(request);
    // In a producer span, with its trace context in the headers, when the
    // app traces (tracing.ts).
    return tracedEnqueue([pb], () => (this.batcher ? this.batcher.enqueue(pb, options.signal) : this.enqueueDirect(pb, options.signal)));
  }

  /**
   * Enqueues jobs in one RPC and returns one result per job, in order.
   * A non-atomic batch judges each job alone (some may fail). An atomic batch
   * is validated as a whole: if any job is invalid it throws a
   * {@link SeppError} whose `index` names the bad job, and nothing is written.
   * Two jobs with the same key: the second is a hit on the first.
   *
   * @param requests - the jobs.
   * @param options - `atomic`, an abort signal.
   */
  async enqueueBatch(requests: EnqueueRequest[], options: BatchOptions = {}): Promise<BatchResult[]> {
    const results: Array<BatchResult | undefined> = new Array(requests.length);
    const send: EnqueueInit[] = [];
    const index: number[] = [];
    requests.forEach((r, i) => {
      try {
        send.push(this.prepare(r));
        index.push(i);
      } catch (err) {
        const e = toSeppError(err);
        if (options.atomic) {
          throw withIndex(e, i);
        }
        results[i] = { ok: false, error: e };
      }
    });
    if (send.length > 0) {
      // A batch whose fate is unknown is resent only when every job has a
      // key: then a resend cannot duplicate one.
      const allKeyed = send.every((m) => m.idempotencyKey !== undefined);
      const res = await tracedEnqueue(send, () =>
        this.withRetries(allKeyed, options.signal, () =>
          this.jobs.enqueueBatch({ jobs: send, atomic: options.atomic ?? false }, this.callOpts(options.signal)),
        ),
      );
      if (res.results.length !== send.length) {
        throw new InternalError(Reason.Internal, `server answered ${res.results.length} results for ${send.length} jobs`);
      }
      res.results.forEach((r, k) => {
        results[index[k]!] = batchResultFromProto(r);
      });
    }
    return results as BatchResult[];
  }

  /**
   * Reads a job.
   *
   * @param jobId - the job id.
   * @throws {@link JobNotFoundError} for an unknown (or deleted) id.
   */
  async getJob(jobId: string, options: CallOptions = {}): Promise<Job> {
    const res = await this.call(options.signal, () => this.jobs.getJob({ jobId }, this.callOpts(options.signal)));
    return jobFromProto(res.job);
  }

  /**
   * Cancels a job that has not finished and returns it; a finished job is
   * returned unchanged.
   *
   * @param jobId - the job id.
   * @throws {@link JobNotFoundError} for an unknown id.
   */
  async cancelJob(jobId: string, options: CallOptions = {}): Promise<Job> {
    const res = await this.call(options.signal, () => this.jobs.cancelJob({ jobId }, this.callOpts(options.signal)));
    return jobFromProto(res.job);
  }

  /**
   * Answers "was this already enqueued, and what became of it?" without
   * enqueueing anything.
   *
   * @param queue - the queue.
   * @param idempotencyKey - the key.
   */
  async lookupIdempotencyKey(queue: string, idempotencyKey: string, options: CallOptions = {}): Promise<KeyLookup> {
    return this.lookup(this.keyRequest(queue, { key: idempotencyKey }), options);
  }

  /**
   * {@link SeppClient.lookupIdempotencyKey} for the key a queue with
   * `key_fields` derives from a payload: the server derives it as an enqueue
   * of `payload` would have, and `KeyLookup.idempotencyKey` says which it
   * was. A queue without `key_fields` refuses a payload with an
   * {@link InvalidFieldError}, as does a payload that lacks a field
   * (`errorMetadata.pointer` names it).
   *
   * @param queue - the queue, one with `key_fields`.
   * @param payload - the payload an enqueue would send (a string as UTF-8).
   */
  async lookupIdempotencyKeyByPayload(queue: string, payload: BytesLike, options: CallOptions = {}): Promise<KeyLookup> {
    return this.lookup(this.keyRequest(queue, { payload }), options);
  }

  /**
   * Deletes the key's dedup record now, so the next enqueue with it creates a
   * new job. It never touches the job.
   *
   * @param queue - the queue.
   * @param idempotencyKey - the key.
   * @returns whether a live record was released, and the job it pointed to.
   */
  async releaseIdempotencyKey(queue: string, idempotencyKey: string, options: CallOptions = {}): Promise<KeyRelease> {
    return this.release(this.keyRequest(queue, { key: idempotencyKey }), options);
  }

  /**
   * {@link SeppClient.releaseIdempotencyKey} for the key a queue with
   * `key_fields` derives from a payload, derived by the server;
   * `KeyRelease.idempotencyKey` says which key it released.
   *
   * @param queue - the queue, one with `key_fields`.
   * @param payload - the payload an enqueue would send (a string as UTF-8).
   */
  async releaseIdempotencyKeyByPayload(queue: string, payload: BytesLike, options: CallOptions = {}): Promise<KeyRelease> {
    return this.release(this.keyRequest(queue, { payload }), options);
  }

  private async lookup(req: MessageInitShape<typeof LookupIdempotencyKeyRequestSchema>, options: CallOptions): Promise<KeyLookup> {
    const res = await this.call(options.signal, () => this.jobs.lookupIdempotencyKey(req, this.callOpts(options.signal)));
    if (!res.found) {
      return { found: false, idempotencyKey: res.idempotencyKey, jobId: "", hits: 0n, state: "unknown", result: new Uint8Array(0) };
    }
    return {
      found: true,
      idempotencyKey: res.idempotencyKey,
      jobId: res.jobId,
      firstEnqueuedAt: dateOf(res.firstEnqueuedAt),
      expiresAt: dateOf(res.expiresAt),
      hits: res.hits,
      state: stateFromProto(res.state),
      result: res.result,
    };
  }

  private async release(req: MessageInitShape<typeof ReleaseIdempotencyKeyRequestSchema>, options: CallOptions): Promise<KeyRelease> {
    const res = await this.call(options.signal, () => this.jobs.releaseIdempotencyKey(req, this.callOpts(options.signal)));
    return { released: res.released, jobId: res.jobId, idempotencyKey: res.idempotencyKey };
  }

  /**
   * Leases jobs; returns none when the wait ends with nothing ready. Most
   * programs use {@link Worker} instead.
   *
   * @param request - queues, max jobs, lease and wait.
   */
  async reserve(request: ReserveRequest, options: CallOptions = {}): Promise<Reservation[]> {
    const waitMs = request.waitMs ?? 0;
    const res = await this.call(options.signal, () =>
      this.workers.reserve(
        {
          queues: request.queues,
          workerId: request.workerId ?? "",
          maxJobs: request.maxJobs ?? 1,
          leaseMs: BigInt(Math.round(request.leaseMs ?? 0)),
          waitMs: BigInt(Math.round(waitMs)),
        },
        { signal: options.signal, timeoutMs: this.cfg.timeoutMs + waitMs },
      ),
    );
    return res.jobs.map((r) => ({
      job: jobFromProto(r.job),
      leaseToken: r.leaseToken,
      attempt: r.attempt,
      leaseExpiresAt: dateOf(r.leaseExpiresAt),
      leaseMs: Number(r.leaseMs),
    }));
  }

  /**
   * Finishes a job, with an optional result that getJob and
   * lookupIdempotencyKey return.
   *
   * Resent after transport errors: the server answers a repeat of a
   * committed Complete (same token) with success and changes nothing.
   *
   * @throws {@link LeaseLostError} when the token no longer holds the lease.
   */
  async complete(jobId: string, leaseToken: string, result?: BytesLike, options: CallOptions = {}): Promise<void> {
    await this.withRetries(true, options.signal, () =>
      this.workers.complete({ jobId, leaseToken, result: toBytes(result) }, this.callOpts(options.signal)),
    );
  }

  /**
   * Completes many jobs in one RPC, each judged alone, and returns one entry
   * per job: `undefined` (completed) or its error (e.g. {@link LeaseLostError}).
   * Resent after transport errors, as {@link SeppClient.complete} is.
   *
   * @param completions - the jobs.
   */
  async completeBatch(completions: Completion[], options: CallOptions = {}): Promise<Array<SeppError | undefined>> {
    const res = await this.withRetries(true, options.signal, () =>
      this.workers.completeBatch(
        { completions: completions.map((c) => ({ jobId: c.jobId, leaseToken: c.leaseToken, result: toBytes(c.result) })) },
        this.callOpts(options.signal),
      ),
    );
    if (res.results.length !== completions.length) {
      throw new InternalError(Reason.Internal, "server answered a batch with the wrong number of results");
    }
    return res.results.map((r) => (r.error ? itemError(r.error) : undefined));
  }

  /**
   * Reports a failed attempt: the job is retried (after the queue's backoff
   * or `retryAfterMs`) or, when attempts run out or `permanent`, dead.
   * Resent after transport errors: a repeat of a committed Fail succeeds,
   * changes nothing, and has `alreadyFailed` set.
   */
  async fail(jobId: string, leaseToken: string, error: string, options: FailOptions & CallOptions = {}): Promise<FailResult> {
    const res = await this.withRetries(true, options.signal, () =>
      this.workers.fail(
        {
          jobId,
          leaseToken,
          error,
          permanent: options.permanent ?? false,
          retryAfterMs: options.retryAfterMs === undefined ? undefined : BigInt(Math.round(options.retryAfterMs)),
        },
        this.callOpts(options.signal),
      ),
    );
    return { state: stateFromProto(res.state), nextRunAt: dateOf(res.nextRunAt), alreadyFailed: res.alreadyFailed };
  }

  /**
   * Keeps a lease alive for another `leaseMs` from now.
   *
   * @returns when the lease now expires.
   * @throws {@link LeaseLostError} when the token no longer holds the lease.
   */
  async extendLease(jobId: string, leaseToken: string, leaseMs: number, options: CallOptions = {}): Promise<Date | undefined> {
    const res = await this.call(options.signal, () =>
      this.workers.extendLease({ jobId, leaseToken, leaseMs: BigInt(Math.round(leaseMs)) }, this.callOpts(options.signal)),
    );
    return dateOf(res.leaseExpiresAt);
  }

  /**
   * Claims an effect key. Most programs use `Effects.do` instead.
   *
   * @param request - scope, key, ttl, lease, wait.
   */
  async claimEffect(request: ClaimEffectRequest, options: CallOptions = {}): Promise<EffectClaim> {
    const waitMs = request.waitMs ?? 0;
    const res = await this.call(options.signal, () =>
      this.effects.claimEffect(
        {
          scope: request.scope,
          key: request.key,
          ttlMs: BigInt(Math.round(request.ttlMs ?? 0)),
          leaseMs: BigInt(Math.round(request.leaseMs ?? 0)),
          waitMs: BigInt(Math.round(waitMs)),
        },
        { signal: options.signal, timeoutMs: this.cfg.timeoutMs + waitMs },
      ),
    );
    return { state: effectStateFromProto(res.outcome), token: res.token, result: res.result, leaseExpiresAt: dateOf(res.leaseExpiresAt) };
  }

  /**
   * Stores the effect's result under the claim's token and returns the
   * stored result. Resent after transport errors: a repeat with the token
   * that completed the effect succeeds and returns what the first call stored.
   *
   * @throws {@link LeaseLostError} when the token no longer holds the key.
   */
  async completeEffect(token: string, result?: BytesLike, options: CallOptions = {}): Promise<Uint8Array> {
    const res = await this.withRetries(true, options.signal, () =>
      this.effects.completeEffect({ token, result: toBytes(result) }, this.callOpts(options.signal)),
    );
    return res.result;
  }

  /** Gives a claim up after a failed effect, so a retry can run it. */
  async releaseEffect(token: string, options: CallOptions = {}): Promise<void> {
    await this.call(options.signal, () => this.effects.releaseEffect({ token }, this.callOpts(options.signal)));
  }

  /** Keeps an effect claim alive for another `leaseMs` from now. */
  async extendEffectLease(token: string, leaseMs: number, options: CallOptions = {}): Promise<Date | undefined> {
    const res = await this.call(options.signal, () =>
      this.effects.extendEffectLease({ token, leaseMs: BigInt(Math.round(leaseMs)) }, this.callOpts(options.signal)),
    );
    return dateOf(res.leaseExpiresAt);
  }

  /** Reads an effect key without claiming it. */
  async getEffect(scope: string, key: string, options: CallOptions = {}): Promise<EffectRecord> {
    const res = await this.call(options.signal, () => this.effects.getEffect({ scope, key }, this.callOpts(options.signal)));
    if (!res.found) return { found: false, result: new Uint8Array(0) };
    return {
      found: true,
      state: effectStateFromProto(res.state),
      result: res.result,
      completedAt: dateOf(res.completedAt),
      expiresAt: dateOf(res.expiresAt),
    };
  }

  /** Lists the queues with their counts per state and their dedup records. */
  async listQueues(options: CallOptions = {}): Promise<QueueInfo[]> {
    const res = await this.call(options.signal, () => this.admin.listQueues({}, this.callOpts(options.signal)));
    return res.queues.map((q) => ({
      name: q.name,
      scheduled: q.scheduled,
      available: q.available,
      reserved: q.reserved,
      completed: q.completed,
      dead: q.dead,
      cancelled: q.cancelled,
      dedupRecords: q.dedupRecords,
      paused: q.paused,
      heldFollowUp: q.heldFollowUp,
      heldConcurrency: q.heldConcurrency,
      heldRate: q.heldRate,
    }));
  }

  /**
   * Lists the `[[outboxes]]` tables this server relays, in config order,
   * with the lag, counts and last error of each relay (role `reader`). A
   * server without outboxes returns none; each node of a cluster reports
   * its own relay.
   */
  async listOutboxes(options: CallOptions = {}): Promise<OutboxInfo[]> {
    const res = await this.call(options.signal, () => this.admin.listOutboxes({}, this.callOpts(options.signal)));
    return res.outboxes.map((o) => ({
      name: o.name,
      dialect: o.dialect,
      table: o.table,
      lagMs: Number(o.lagMs),
      relayed: o.relayed,
      dead: o.dead,
      checkedAt: dateOf(o.checkedAt),
      lastError: o.lastError,
    }));
  }

  /**
   * Lists the server's `[[schedules]]`, in config order, each with its last
   * and next tick (role `reader`). A tick's job has the idempotency key
   * `schedule:<name>:<tick>`, so every node may fire a tick and one job
   * exists; a server without schedules returns none.
   */
  async listSchedules(options: CallOptions = {}): Promise<ScheduleInfo[]> {
    const res = await this.call(options.signal, () => this.admin.listSchedules({}, this.callOpts(options.signal)));
    return res.schedules.map((s) => ({
      name: s.name,
      cron: s.cron,
      timezone: s.timezone,
      queue: s.queue,
      jobType: s.jobType,
      catchUp: s.catchUp,
      lastTick: dateOf(s.lastTick),
      nextTick: dateOf(s.nextTick),
      lastJobId: s.lastJobId,
      lastError: s.lastError,
    }));
  }

  /**
   * Lists a queue's jobs, optionally in one state, one page at a time.
   *
   * @returns the page and the token of the next one ("" at the end).
   */
  async listJobs(
    request: { queue: string; state?: JobState; pageSize?: number; pageToken?: string },
    options: CallOptions = {},
  ): Promise<{ jobs: Job[]; nextPageToken: string }> {
    const res = await this.call(options.signal, () =>
      this.admin.listJobs(
        { queue: request.queue, state: stateToProto(request.state), pageSize: request.pageSize ?? 0, pageToken: request.pageToken ?? "" },
        this.callOpts(options.signal),
      ),
    );
    return { jobs: res.jobs.map(jobFromProto), nextPageToken: res.nextPageToken };
  }

  /**
   * Makes the selected dead jobs available again with their attempts reset.
   *
   * @returns how many it requeued.
   * @throws {@link NotDeadError} when some of `which.jobIds` named no dead
   * job: the others were requeued all the same, and the error's `count` says
   * how many.
   */
  async requeueDeadJobs(which: DeadJobs, options: CallOptions = {}): Promise<number> {
    const res = await this.call(options.signal, () => this.admin.requeueDeadJobs(deadSelection(which), this.callOpts(options.signal)));
    return countDead(Number(res.requeued), res.missingJobIds);
  }

  /**
   * Deletes the selected dead jobs. Their dedup records stay until their
   * windows end.
   *
   * @returns how many it purged.
   * @throws {@link NotDeadError} when some of `which.jobIds` named no dead
   * job: the others were purged all the same, and the error's `count` says
   * how many.
   */
  async purgeDeadJobs(which: DeadJobs, options: CallOptions = {}): Promise<number> {
    const res = await this.call(options.signal, () => this.admin.purgeDeadJobs(deadSelection(which), this.callOpts(options.signal)));
    return countDead(Number(res.purged), res.missingJobIds);
  }

  /**
   * Stops delivery from a queue (enqueues still work).
   *
   * @throws {@link UnknownQueueError} for a queue the server does not know
   * (not declared, nothing stored: most likely a mistyped name), unless
   * `options.create`.
   */
  async pauseQueue(queue: string, options: PauseOptions = {}): Promise<void> {
    await this.call(options.signal, () => this.admin.pauseQueue({ queue, create: options.create ?? false }, this.callOpts(options.signal)));
  }

  /**
   * Resumes delivery from a paused queue.
   *
   * @throws {@link UnknownQueueError} for a queue the server does not know,
   * unless `options.create`.
   */
  async resumeQueue(queue: string, options: PauseOptions = {}): Promise<void> {
    await this.call(options.signal, () => this.admin.resumeQueue({ queue, create: options.create ?? false }, this.callOpts(options.signal)));
  }

  // ---- internals -------------------------------------------------------

  /** Checks a request locally and converts it. @internal */
  private prepare(r: EnqueueRequest): EnqueueInit {
    if (r === null || typeof r !== "object") {
      throw new InvalidFieldError(Reason.InvalidField, "request: want an object { queue, jobType, ... }");
    }
    if (this.cfg.checkKeys) {
      for (const [field, v] of [
        ["queue", r.queue],
        ["job_type", r.jobType],
      ] as const) {
        if (typeof v !== "string") {
          throw new InvalidFieldError(Reason.InvalidField, `${field}: must be a string, not ${typeof v}`, { metadata: { field } });
        }
        if (!isWellFormed(v)) {
          throw new InvalidFieldError(Reason.InvalidField, `${field}: is not valid UTF-8`, { metadata: { field } });
        }
      }
      if (r.idempotencyKey !== undefined && r.idempotencyKey !== null) checkIdempotencyKey(r.idempotencyKey, this.cfg.maxKeyBytes);
    }
    return enqueueToProto(r);
  }

  private checkKey(key: string, limit: number): void {
    if (this.cfg.checkKeys) checkIdempotencyKey(key, limit);
  }

  private callOpts(signal: AbortSignal | undefined): { signal?: AbortSignal; timeoutMs: number } {
    return { signal, timeoutMs: this.cfg.timeoutMs };
  }

  /** Runs an RPC, turning its error into a SeppError (or the caller's abort). */
  private async call<T>(signal: AbortSignal | undefined, f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      signal?.throwIfAborted();
      throw toSeppError(err);
    }
  }

  /** Runs an RPC, resending it after transport errors when `keyed`. */
  private async withRetries<T>(keyed: boolean, signal: AbortSignal | undefined, f: () => Promise<T>): Promise<T> {
    for (let retry = 0; ; retry++) {
      try {
        return await f();
      } catch (err) {
        signal?.throwIfAborted();
        const e = toSeppError(err);
        if (!(await this.shouldRetry(keyed, e, retry, signal))) {
          signal?.throwIfAborted();
          throw e;
        }
      }
    }
  }

  /**
   * Whether to resend after `err` (only a keyed request, only an
   * `UNAVAILABLE` error, at most `maxRetries` times), after waiting the
   * policy's delay for the resend that follows `retry` earlier ones.
   */
  private async shouldRetry(keyed: boolean, err: SeppError, retry: number, signal?: AbortSignal): Promise<boolean> {
    if (this.closed || !keyed || !isRetryable(err) || retry >= this.cfg.maxRetries) return false;
    await sleep(retryDelay(retry, Math.random()), signal);
    return !signal?.aborted;
  }

  /** One Enqueue RPC with the retries of a keyed request. */
  private async enqueueDirect(pb: EnqueueInit, signal?: AbortSignal): Promise<Ack> {
    const res = await this.withRetries(pb.idempotencyKey !== undefined, signal, () => this.jobs.enqueue(pb, this.callOpts(signal)));
    return ackFromProto(res);
  }

  /**
   * The batcher's send: one RPC for `reqs`, Enqueue for one and EnqueueBatch
   * for more, with each request's outcome; the RPC's own error is thrown.
   */
  private async sendEnqueues(reqs: EnqueueInit[], signal?: AbortSignal): Promise<Array<Ack | SeppError>> {
    const opts = { signal, timeoutMs: this.cfg.timeoutMs };
    try {
      if (reqs.length === 1) return [ackFromProto(await this.jobs.enqueue(reqs[0]!, opts))];
      const res = await this.jobs.enqueueBatch({ jobs: reqs }, opts);
      if (res.results.length !== reqs.length) {
        throw new InternalError(Reason.Internal, `server answered ${res.results.length} results for ${reqs.length} jobs`);
      }
      return res.results.map((r) => {
        const br = batchResultFromProto(r);
        return br.ok ? br.ack : br.error;
      });
    } catch (err) {
      throw toSeppError(err);
    }
  }

  /** The request of a lookup or release: by key, or by a payload from which the server derives the key. */
  private keyRequest(
    queue: string,
    by: { key: string } | { payload: BytesLike },
  ): MessageInitShape<typeof LookupIdempotencyKeyRequestSchema> & MessageInitShape<typeof ReleaseIdempotencyKeyRequestSchema> {
    if ("key" in by) {
      this.checkKey(by.key, lookupKeyLimit(this.cfg.maxKeyBytes));
      return { queue, idempotencyKey: by.key };
    }
    const payload = toBytes(by.payload);
    // The server reads an empty payload as "no payload" and would look up
    // the empty key instead; no payload a queue's key_fields accept is empty.
    if (payload.length === 0) {
      throw new InvalidFieldError(Reason.InvalidField, "payload: is empty; give the JSON payload an enqueue would send, from which the queue's key_fields derive the key", {
        metadata: { field: "payload" },
      });
    }
    return { queue, payload };
  }
}

/** A copy of e naming job i of an atomic batch. */
function withIndex(e: SeppError, i: number): SeppError {
  const copy = new (e.constructor as new (...a: ConstructorParameters<typeof SeppError>) => SeppError)(e.reason, `jobs[${i}]: ${e.rawMessage}`, {
    code: e.code,
    metadata: { ...e.errorMetadata, index: String(i) },
    index: i,
    cause: e,
  });
  return copy;
}

/** The request selecting dead jobs by queue, ids or all. */
function deadSelection(which: DeadJobs): { queue: string; jobIds: string[]; all: boolean } {
  return { queue: which.queue ?? "", jobIds: which.jobIds ?? [], all: which.all ?? false };
}

/** `n`, or a NotDeadError carrying it when some ids named no dead job. */
function countDead(n: number, missingJobIds: string[]): number {
  if (missingJobIds.length > 0) throw new NotDeadError(missingJobIds, n);
  return n;
}

function itemError(e: { code: string; reason: string; message: string; metadata?: { [key: string]: string } }): SeppError {
  return toSeppErrorFromItem(e.code, e.reason, e.message, e.metadata);
}


const codeByName: Record<string, Code> = {
  canceled: Code.Canceled,
  unknown: Code.Unknown,
  invalid_argument: Code.InvalidArgument,
  deadline_exceeded: Code.DeadlineExceeded,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  permission_denied: Code.PermissionDenied,
  resource_exhausted: Code.ResourceExhausted,
  failed_precondition: Code.FailedPrecondition,
  aborted: Code.Aborted,
  out_of_range: Code.OutOfRange,
  unimplemented: Code.Unimplemented,
  internal: Code.Internal,
  unavailable: Code.Unavailable,
  data_loss: Code.DataLoss,
  unauthenticated: Code.Unauthenticated,
};

function toSeppErrorFromItem(code: string, reason: string, message: string, metadata?: { [key: string]: string }): SeppError {
  return newSeppError(reason || Reason.Internal, message, { code: codeByName[code] ?? Code.Internal, metadata: { ...metadata } });
}

function batchResultFromProto(r: EnqueueBatchResult): BatchResult {
  if (r.outcome.case === "error") {
    return { ok: false, error: itemError(r.outcome.value) };
  }
  return { ok: true, ack: ackFromProto(r.outcome.case === "ack" ? r.outcome.value : undefined) };
}

/** A transport that adds `fixed` headers to every call of `inner`. */
function withHeaders(inner: Transport, fixed: Record<string, string>): Transport {
  const merge = (header: HeadersInit | undefined) => {
    const h = new Headers(header);
    for (const [k, v] of Object.entries(fixed)) h.set(k, v);
    return h;
  };
  return {
    unary: (method, signal, timeoutMs, header, input, contextValues) =>
      inner.unary(method, signal, timeoutMs, merge(header), input, contextValues),
    stream: (method, signal, timeoutMs, header, input, contextValues) =>
      inner.stream(method, signal, timeoutMs, merge(header), input, contextValues),
  };
}
