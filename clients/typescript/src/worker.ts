/**
 * The worker runtime: reserves jobs from queues, calls the handler
 * registered for each job type, keeps leases alive while handlers run, and
 * reports each outcome.
 *
 * ```ts
 * const worker = new Worker(client, { queues: ["emails"], concurrency: 16 });
 * worker.handle("receipt", async (job) => {
 *   await sendReceipt(job.payload, { signal: job.signal });
 * });
 * process.once("SIGTERM", () => void worker.stop()); // finishes running jobs
 * await worker.run(); // until stop(); then a graceful shutdown
 * ```
 *
 * Delivery is at least once: a job whose worker dies, or whose lease
 * expires, is delivered again. Make handlers idempotent: guard each external
 * effect with `Effects.do` (`new Effects(client)`).
 *
 * A handler that returns completes the job (its return value, bytes or a
 * string, is stored as the job's result). A thrown error retries the job
 * with the queue's backoff; {@link PermanentError} (or `permanent(err)`)
 * dead-letters it at once; {@link RetryAfterError} (or `retryAfter(err, ms)`)
 * retries it after that delay; an {@link EffectInProgressError} retries it
 * after a second.
 *
 * This mirrors the Go package `github.com/sepp-dev/sepp/worker`.
 *
 * @module
 */
import { BatchTooLargeError, EffectInProgressError, LeaseLostError, type SeppError } from "./errors.js";
import { defaultLogger, type Logger } from "./effect.js";
import { toBytes, type BytesLike, type Completion, type FailOptions, type Job, type Reservation } from "./types.js";
import { tracedProcess } from "./tracing.js";
import type { SeppClient } from "./client.js";

/** A delivered job, as a handler gets it. */
export interface WorkerJob extends Job {
  /** The deliveries of this job, this one included. */
  attempt: number;
  /** Holds the lease; the runtime uses it to report the outcome. */
  leaseToken: string;
  /**
   * Aborts when the handler should give up: its lease was lost (the job
   * belongs to another delivery now) or the shutdown timeout passed.
   */
  signal: AbortSignal;
}

/** Runs one job. What it returns (bytes or a string) is stored as the completed job's result. */
export type Handler = (job: WorkerJob) => Promise<BytesLike | void | undefined> | BytesLike | void | undefined;

/** Options of a {@link Worker}. Every field but `queues` has a default. */
export interface WorkerOptions {
  /** Queues to reserve from. Required. */
  queues: string[];
  /** How many jobs run at once. Default 10. */
  concurrency?: number;
  /** How long each job is leased, in ms; extended while the handler runs. Default 0: the queue's `lease_ms`. */
  leaseMs?: number;
  /** How long one reserve waits for a job (long poll), in ms. Default 10 s. */
  waitMs?: number;
  /**
   * How long stop() lets running handlers finish, in ms. After it their
   * signals abort and their leases are no longer extended; a job whose
   * handler then throws is not reported, so it is delivered again after its
   * lease without spending an attempt. stop() waits 5 s more for handlers to
   * return, then resolves without those that ignore their signal. Default 30 s.
   */
  shutdownTimeoutMs?: number;
  /** Names this worker in the server's records. Default `"<hostname>-<pid>"` on Node, random in a browser. */
  workerId?: string;
  /** Receives the runtime's logs. Default {@link defaultLogger}. */
  logger?: Logger;
}

/** Marks an error as permanent: the job is dead-lettered at once instead of retried. */
export class PermanentError extends Error {
  /**
   * @param message - the error stored with the dead job.
   * @param options - the cause.
   */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PermanentError";
  }
}

/** Retries the job after `retryAfterMs` instead of the queue's backoff (while it has attempts left). */
export class RetryAfterError extends Error {
  /**
   * @param message - the error stored with the job.
   * @param retryAfterMs - the delay before the next attempt, in ms.
   * @param options - the cause.
   */
  constructor(
    message: string,
    readonly retryAfterMs: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "RetryAfterError";
  }
}

function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/**
 * Wraps `err` so that its job is dead-lettered at once.
 *
 * @param err - the handler's error.
 */
export function permanent(err: unknown): PermanentError {
  return new PermanentError(messageOf(err), { cause: err });
}

/**
 * Wraps `err` so that its job is retried after `ms` milliseconds.
 *
 * @param err - the handler's error.
 * @param ms - the delay.
 */
export function retryAfter(err: unknown, ms: number): RetryAfterError {
  return new RetryAfterError(messageOf(err), ms, { cause: err });
}

/** When a job whose effect was in progress elsewhere is tried again, in ms. */
const EFFECT_RETRY_DELAY_MS = 1000;
/** How long stop() still waits, after aborting handlers at the shutdown timeout, for them to return. */
const AFTER_CANCEL_GRACE_MS = 5000;
/** The most jobs one reserve asks for (the server's limit). */
const MAX_RESERVE = 1000;

function defaultWorkerId(): string {
  const proc = (globalThis as { process?: { pid?: number; env?: Record<string, string | undefined> } }).process;
  if (proc?.pid !== undefined) {
    const host = proc.env?.["HOSTNAME"] ?? "node";
    return `${host}-${proc.pid}`;
  }
  return `browser-${Math.random().toString(36).slice(2, 10)}`;
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
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
 * Reserves and runs jobs. Create it, register handlers with
 * {@link Worker.handle}, then call {@link Worker.run} once; {@link Worker.stop}
 * shuts it down gracefully.
 */
export class Worker {
  private readonly handlers = new Map<string, Handler>();
  private fallback: Handler | undefined;
  private readonly opts: Required<Omit<WorkerOptions, "leaseMs">> & { leaseMs: number };
  private readonly stopping = new AbortController();
  /** Set at the shutdown timeout; the handlers still running are then aborted through `jobSignals`. */
  private cutShort = false;
  private readonly jobSignals = new Set<AbortController>();
  private readonly running = new Set<Promise<void>>();
  private readonly completer: Completer;
  private slotFreed: (() => void) | undefined;
  private done: Promise<void> | undefined;

  /**
   * @param client - the client to reserve and report through.
   * @param options - queues, concurrency, lease, wait, shutdown timeout.
   */
  constructor(
    private readonly client: SeppClient,
    options: WorkerOptions,
  ) {
    this.opts = {
      queues: options.queues,
      concurrency: Math.max(1, options.concurrency ?? 10),
      leaseMs: options.leaseMs ?? 0,
      waitMs: options.waitMs && options.waitMs > 0 ? options.waitMs : 10_000,
      shutdownTimeoutMs: options.shutdownTimeoutMs && options.shutdownTimeoutMs > 0 ? options.shutdownTimeoutMs : 30_000,
      workerId: options.workerId ?? defaultWorkerId(),
      logger: options.logger ?? defaultLogger,
    };
    this.completer = new Completer(client);
  }

  /**
   * Registers `handler` for jobs of `jobType`. Register before run().
   *
   * @returns this worker, for chaining.
   */
  handle(jobType: string, handler: Handler): this {
    this.handlers.set(jobType, handler);
    return this;
  }

  /**
   * Registers `handler` for every job type without a handler of its own.
   *
   * @returns this worker, for chaining.
   */
  handleAll(handler: Handler): this {
    this.fallback = handler;
    return this;
  }

  /** The number of handlers running now. */
  get active(): number {
    return this.running.size;
  }

  /**
   * Reserves and runs jobs until {@link Worker.stop} is called (or
   * `options.signal` aborts), then shuts down gracefully: it stops
   * reserving, lets running handlers finish within `shutdownTimeoutMs`,
   * then aborts the rest (their jobs are delivered again once their leases
   * end). Resolves once shut down. Calling it again returns the same promise.
   *
   * @param options - a signal that stops the worker like stop().
   */
  run(options: { signal?: AbortSignal } = {}): Promise<void> {
    if (this.done) return this.done;
    if (this.opts.queues.length === 0) {
      return Promise.reject(new Error("worker: options.queues is empty: name the queues to work on"));
    }
    options.signal?.addEventListener("abort", () => void this.stop(), { once: true });
    this.done = this.loop();
    return this.done;
  }

  /**
   * Shuts the worker down gracefully (see {@link Worker.run}) and resolves
   * when it has. Safe to call more than once, e.g. from a SIGTERM handler.
   */
  stop(): Promise<void> {
    this.stopping.abort();
    this.slotFreed?.();
    return this.done ?? Promise.resolve();
  }

  private async loop(): Promise<void> {
    const log = this.opts.logger;
    const stop = this.stopping.signal;
    log.info("worker started", { workerId: this.opts.workerId, queues: this.opts.queues, concurrency: this.opts.concurrency });
    while (!stop.aborted) {
      const free = this.opts.concurrency - this.running.size;
      if (free <= 0) {
        await new Promise<void>((r) => (this.slotFreed = r));
        this.slotFreed = undefined;
        continue;
      }
      let jobs: Reservation[];
      try {
        jobs = await this.client.reserve(
          {
            queues: this.opts.queues,
            workerId: this.opts.workerId,
            maxJobs: Math.min(free, MAX_RESERVE),
            leaseMs: this.opts.leaseMs,
            waitMs: this.opts.waitMs,
          },
          { signal: stop },
        );
      } catch (err) {
        if (!stop.aborted) {
          log.warn("reserve failed; retrying", { err: messageOf(err) });
          await delay(1000, stop);
        }
        continue;
      }
      for (const r of jobs) {
        const p: Promise<void> = this.runJob(r).finally(() => {
          this.running.delete(p);
          this.slotFreed?.();
        });
        this.running.add(p);
      }
    }

    log.info("worker stopping: waiting for running jobs", { timeoutMs: this.opts.shutdownTimeoutMs });
    const finished = await this.allDoneWithin(this.opts.shutdownTimeoutMs);
    if (!finished) {
      log.warn("shutdown timeout: aborting running jobs; their leases are no longer extended and they will be delivered again");
      this.cutShort = true;
      for (const ac of this.jobSignals) ac.abort(new Error("worker shutdown timeout"));
      const returned = await this.allDoneWithin(AFTER_CANCEL_GRACE_MS);
      if (!returned) log.warn("some handlers ignore their signal and are still running; returning without them");
    }
    log.info("worker stopped", { workerId: this.opts.workerId });
  }

  /** Whether every running job finished within `ms`; the timer never outlives the answer. */
  private async allDoneWithin(ms: number): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)));
    try {
      return await Promise.race([Promise.allSettled([...this.running]).then(() => true), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Runs one reserved job and reports its outcome. */
  private async runJob(r: Reservation): Promise<void> {
    const log = this.opts.logger;
    const ac = new AbortController();
    this.jobSignals.add(ac);
    const job: WorkerJob = { ...r.job, attempt: r.attempt, leaseToken: r.leaseToken, signal: ac.signal };
    const attrs = { jobId: job.jobId, jobType: job.jobType, queue: job.queue, attempt: job.attempt };

    // Keep the lease alive while the handler runs: extend it by its own
    // length every third of it.
    let lease = r.leaseMs;
    if (!(lease > 0)) lease = Math.max((r.leaseExpiresAt?.getTime() ?? 0) - Date.now(), 100);
    const timer = setInterval(() => {
      this.client.extendLease(job.jobId, job.leaseToken, lease, { signal: ac.signal }).catch((err) => {
        if (ac.signal.aborted) return;
        if (err instanceof LeaseLostError) {
          log.warn("lease lost: aborting the handler; the job belongs to another delivery now", attrs);
          clearInterval(timer);
          ac.abort(err);
          return;
        }
        log.warn("lease extension failed; will retry", { ...attrs, err: messageOf(err) });
      });
    }, Math.max(lease / 3, 10));

    let result: Uint8Array | undefined;
    let error: unknown;
    let failed = false;
    try {
      const h = this.handlers.get(job.jobType) ?? this.fallback;
      if (!h) throw new Error(`no handler registered for job type ${JSON.stringify(job.jobType)} on worker ${this.opts.workerId}`);
      // In a span continuing the producer's trace, when the job carries one
      // and the app traces (tracing.ts).
      result = toBytes((await tracedProcess(job, async () => h(job))) ?? undefined);
    } catch (err) {
      failed = true;
      error = err;
    } finally {
      clearInterval(timer);
      this.jobSignals.delete(ac);
    }
    if (failed && this.cutShort) {
      // Cut short by the shutdown timeout: report nothing, so the job is
      // delivered again once its lease ends, without spending an attempt on
      // a failure that was not the job's.
      log.warn("job cut short by shutdown; it will be delivered again after its lease", { ...attrs, err: messageOf(error) });
      return;
    }
    if (!failed) {
      try {
        await this.completer.complete({ jobId: job.jobId, leaseToken: job.leaseToken, result });
      } catch (err) {
        log.warn("complete failed; the job will be delivered again", { ...attrs, err: messageOf(err) });
      }
      return;
    }
    const opts: FailOptions = {};
    if (error instanceof PermanentError) opts.permanent = true;
    else if (error instanceof RetryAfterError) opts.retryAfterMs = error.retryAfterMs;
    else if (error instanceof EffectInProgressError) {
      // Another delivery is running this job's effect (raise mode): come
      // back soon, when it has finished, rather than after the backoff.
      opts.retryAfterMs = EFFECT_RETRY_DELAY_MS;
    }
    try {
      const res = await this.client.fail(job.jobId, job.leaseToken, messageOf(error), opts);
      if (res.state === "dead") log.warn("job failed and is dead", { ...attrs, err: messageOf(error) });
      else log.info("job failed; will retry", { ...attrs, err: messageOf(error), nextRunAt: res.nextRunAt });
    } catch (ferr) {
      log.warn("fail failed; the job will be delivered again", { ...attrs, err: messageOf(ferr), jobErr: messageOf(error) });
    }
  }
}

/**
 * Coalesces the completions of concurrent handlers into CompleteBatch RPCs
 * by natural batching: one RPC in flight, the completions that arrive
 * meanwhile go together in the next. Each caller waits for its own
 * completion to be durable.
 */
class Completer {
  private pending: Array<{ c: Completion; resolve: () => void; reject: (e: unknown) => void }> = [];
  private sending = false;
  private max = 1000;

  constructor(private readonly client: SeppClient) {}

  complete(c: Completion): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ c, resolve, reject });
      if (!this.sending) {
        this.sending = true;
        void this.send();
      }
    });
  }

  private async send(): Promise<void> {
    for (;;) {
      const batch = this.pending.splice(0, this.max);
      if (batch.length === 0) {
        this.sending = false;
        return;
      }
      let errs: Array<SeppError | undefined>;
      try {
        errs = await this.completeBatch(batch.map((b) => b.c));
      } catch (err) {
        for (const b of batch) b.reject(err);
        continue;
      }
      batch.forEach((b, i) => (errs[i] ? b.reject(errs[i]) : b.resolve()));
    }
  }

  /** Sends cs, splitting it when the server's max_batch_size is below it (and remembering the smaller size). */
  private async completeBatch(cs: Completion[]): Promise<Array<SeppError | undefined>> {
    try {
      return await this.client.completeBatch(cs);
    } catch (err) {
      if (!(err instanceof BatchTooLargeError) || cs.length === 1) throw err;
      const half = Math.floor(cs.length / 2);
      this.max = half;
      const a = await this.completeBatch(cs.slice(0, half));
      const b = await this.completeBatch(cs.slice(half));
      return [...a, ...b];
    }
  }
}
