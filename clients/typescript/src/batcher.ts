/**
 * Natural batching of concurrent enqueues: at most `maxInFlight` RPCs are in
 * flight; calls that arrive while all of them are busy wait and go together,
 * as one EnqueueBatch, when one returns. A call that finds a free slot and
 * nothing waiting is sent at once, alone, so a lone caller pays no added
 * delay. Each caller still gets its own ack or error.
 *
 * The batcher is handed the two things it needs from the client, a function
 * that sends one RPC and one that decides on a resend, so it depends on
 * nothing above it and the client is its only user.
 *
 * @module
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { EnqueueRequestSchema } from "./gen/sepp/v1/job_pb.js";
import { BatchTooLargeError, isRetryable, type SeppError } from "./errors.js";
import type { Ack } from "./types.js";

/** One enqueue, as the generated message's init shape. */
export type EnqueueInit = MessageInitShape<typeof EnqueueRequestSchema>;

/**
 * Sends one RPC for `reqs` (Enqueue for one, EnqueueBatch for more) and
 * resolves with one outcome per request, in order: its ack, or the error
 * that request alone got. It rejects with a SeppError when the RPC as a
 * whole failed.
 */
export type SendBatch = (reqs: EnqueueInit[], signal?: AbortSignal) => Promise<Array<Ack | SeppError>>;

/**
 * Waits before the resend that follows `retry` earlier ones after `err`, and
 * says whether to resend: false when `err` is not one to resend, the resends
 * are spent, or `signal` aborted.
 */
export type ShouldResend = (err: SeppError, retry: number, signal?: AbortSignal) => Promise<boolean>;

/** Tunes natural batching of concurrent enqueues. */
export interface BatchingOptions {
  /** Coalesced RPCs in flight at once; calls wait only while all are busy. Default 2. */
  maxInFlight?: number;
  /** Jobs in one coalesced EnqueueBatch; keep it at or below the server's `max_batch_size`. Default 1000. */
  maxBatchSize?: number;
  /** Payload bytes in one coalesced RPC. Default 4 MiB. */
  maxBatchBytes?: number;
}

/** One enqueue waiting in the batcher. */
interface PendingCall {
  req: EnqueueInit;
  keyed: boolean;
  signal?: AbortSignal;
  settled: boolean;
  resolve(a: Ack): void;
  reject(e: unknown): void;
}

/** A callback run after the current tasks, so callers just answered can enqueue again first. */
const yieldToCallers: () => Promise<void> =
  typeof setImmediate === "function"
    ? () => new Promise((r) => setImmediate(r))
    : () => new Promise((r) => setTimeout(r, 0));

/** Coalesces concurrent enqueues into EnqueueBatch RPCs (see the module's comment). */
export class Batcher {
  private pending: PendingCall[] = [];
  private senders = 0;
  private maxBatch: number;

  /**
   * @param send - sends one RPC for a batch.
   * @param shouldResend - the client's retry policy.
   * @param cfg - the limits.
   */
  constructor(
    private readonly send: SendBatch,
    private readonly shouldResend: ShouldResend,
    private readonly cfg: Required<BatchingOptions>,
  ) {
    this.maxBatch = cfg.maxBatchSize;
  }

  /** Enqueues one job, alone or with others, and resolves with its own ack. */
  enqueue(req: EnqueueInit, signal?: AbortSignal): Promise<Ack> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<Ack>((resolve, reject) => {
      const onAbort = () => {
        if (cl.settled) return;
        cl.settled = true;
        // The job may still be enqueued; a keyed retry is harmless.
        reject(signal!.reason);
      };
      const cl: PendingCall = {
        req,
        keyed: req.idempotencyKey !== undefined,
        signal,
        settled: false,
        resolve: (a) => {
          if (cl.settled) return;
          cl.settled = true;
          signal?.removeEventListener("abort", onAbort);
          resolve(a);
        },
        reject: (e) => {
          if (cl.settled) return;
          cl.settled = true;
          signal?.removeEventListener("abort", onAbort);
          reject(e);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      if (this.senders < this.cfg.maxInFlight && this.pending.length === 0) {
        // Idle: send this call alone, and hand the slot on to a drain loop
        // only if calls queued up meanwhile.
        this.senders++;
        void this.sendBatch([cl]).finally(() => {
          if (this.pending.length > 0) void this.drain();
          else this.senders--;
        });
        return;
      }
      this.pending.push(cl);
      if (this.senders < this.cfg.maxInFlight) {
        this.senders++;
        void this.drain();
      }
    });
  }

  /** Sends pending calls, one RPC at a time, until none is left; then frees its slot. */
  private async drain(): Promise<void> {
    for (let last = 0; ; ) {
      if (last > 1) {
        // The callers just answered are about to enqueue again; let them
        // run first so they join the next batch instead of trailing it.
        await yieldToCallers();
      }
      const batch = this.take();
      if (batch.length === 0) {
        this.senders--;
        return;
      }
      await this.sendBatch(batch);
      last = batch.length;
    }
  }

  /** Removes the next batch from pending, within the size limits; calls already given up are dropped. */
  private take(): PendingCall[] {
    let n = 0;
    let bytes = 0;
    while (n < this.pending.length && n < this.maxBatch) {
      const size = (this.pending[n]!.req.payload as Uint8Array | undefined)?.length ?? 0;
      if (n > 0 && bytes + size > this.cfg.maxBatchBytes) break;
      bytes += size;
      n++;
    }
    return this.pending.splice(0, n).filter((c) => !c.settled);
  }

  /**
   * Sends one batch and answers its calls. Keyed calls whose fate is unknown
   * after a transport error are resent with their keys; unkeyed ones get the
   * error, since resending them could create duplicates. Never rejects.
   */
  private async sendBatch(batch: PendingCall[]): Promise<void> {
    for (let retry = 0; batch.length > 0; retry++) {
      // A call sent alone can be aborted in flight; a shared RPC is not
      // one caller's to abort (a caller that gives up is answered at once).
      const signal = batch.length === 1 ? batch[0]!.signal : undefined;
      let err: SeppError;
      try {
        const outcomes = await this.send(
          batch.map((c) => c.req),
          signal,
        );
        outcomes.forEach((o, i) => (o instanceof Error ? batch[i]!.reject(o) : batch[i]!.resolve(o)));
        return;
      } catch (e) {
        err = e as SeppError;
      }
      if (err instanceof BatchTooLargeError && batch.length > 1) {
        // The server's max_batch_size is below ours: learn it, send the halves.
        const half = Math.floor(batch.length / 2);
        this.maxBatch = Math.min(this.maxBatch, half);
        await this.sendBatch(batch.slice(0, half));
        await this.sendBatch(batch.slice(half));
        return;
      }
      if (!isRetryable(err)) {
        for (const cl of batch) cl.reject(err);
        return;
      }
      const again: PendingCall[] = [];
      for (const cl of batch) {
        if (cl.settled) continue;
        if (cl.keyed) again.push(cl);
        else cl.reject(err);
      }
      if (again.length === 0) return;
      // The wait is the batch's, not one caller's: a caller that gives up
      // meanwhile is dropped on the next pass.
      if (!(await this.shouldResend(err, retry, signal))) {
        for (const cl of again) cl.reject(err);
        return;
      }
      batch = again.filter((c) => !c.settled);
    }
  }
}
