/**
 * The effect helper: makes a handler's external effect (a mail, a charge)
 * happen once under at-least-once delivery. One call guards one effect with
 * an effect key `(scope, key)`.
 *
 * ```ts
 * const effects = new Effects(client);
 * const res = await effects.do("mail.invoice", "order-9.invoice",
 *   async (signal) => mailer.sendInvoice(order, { signal }),
 *   { mode: "wait", ttlMs: 24 * 3600_000 });
 * res.value;    // the receipt, from this run or replayed from the first one
 * res.replayed; // true when fn did not run here
 * ```
 *
 * The first call to claim the key runs `fn` and stores its result; a later
 * call with the same key, from any delivery on any worker, gets that result
 * back without running `fn`. While one holder runs `fn`, others wait for its
 * result (`mode: "wait"`, the default) or get {@link EffectInProgressError}
 * (`mode: "raise"`), which the {@link Worker} turns into a retry after a
 * second.
 *
 * Name the effect, not the delivery: `"order-9.invoice"` is the invoice of
 * order 9 however many jobs ask for it; a job id is one delivery's identity.
 * Any UTF-8 string of 1 to 256 bytes is a key; no character is reserved (a
 * colon is as good as a dot).
 *
 * It fails closed: an invalid key, or a server that cannot be reached, is an
 * error and `fn` does not run. `failOpen: true` runs `fn` unprotected when
 * the server is unreachable instead, and logs and counts every such run
 * ({@link Effects.unprotectedRuns}).
 *
 * This mirrors the Go package `github.com/sepp-dev/sepp/effect`.
 *
 * @module
 */
import {
  EffectInProgressError,
  InvalidFieldError,
  LeaseLostError,
  Reason,
  SeppError,
  toSeppError,
  UnavailableError,
} from "./errors.js";
import { isWellFormed, utf8Length } from "./keys.js";
import { toBytes, type BytesLike } from "./types.js";
import { tracedEffect } from "./tracing.js";
import type { SeppClient } from "./client.js";

/** What a call does while another holder runs the effect: wait for its result, or throw {@link EffectInProgressError}. */
export type InFlightMode = "wait" | "raise";

/** A minimal logger; `console` fits. */
export interface Logger {
  /** Routine events. */
  info(message: string, attributes?: Record<string, unknown>): void;
  /** Something a person should look at. */
  warn(message: string, attributes?: Record<string, unknown>): void;
}

/** The default logger: warnings to `console.warn`, routine events dropped. */
export const defaultLogger: Logger = {
  info() {},
  warn(message, attributes) {
    console.warn(`sepp: ${message}`, attributes ?? "");
  },
};

/** Options of {@link Effects.do}. Every field has a default. */
export interface EffectOptions {
  /**
   * How long the completed record lives, in ms: size it to outlast the
   * longest redelivery of any job that may carry this effect. Default 24 h.
   */
  ttlMs?: number;
  /** How long a claim holds without an extension, in ms; it is extended every third of it while `fn` runs. Default 30 s. */
  leaseMs?: number;
  /** What to do while another holder runs the effect. Default `"wait"`. */
  mode?: InFlightMode;
  /** Bounds one server-side wait for a holder in wait mode, in ms; the call claims again after it, until aborted. Default 30 s. */
  waitTimeoutMs?: number;
  /** Run `fn` unprotected when the server cannot be reached, logging and counting the run. Default false: fail closed. */
  failOpen?: boolean;
  /** Receives the failOpen warnings. Default {@link defaultLogger}. */
  logger?: Logger;
  /** Aborts the claim, and is passed on (combined with a lease loss) to `fn`. */
  signal?: AbortSignal;
}

/** How {@link Effects.do} got its result. */
export interface EffectResult {
  /** The effect's result: from this run, or the one stored by an earlier run. */
  value: Uint8Array;
  /** True when `fn` did not run here: the result is the one stored by an earlier run. */
  replayed: boolean;
  /** True when `fn` ran without a claim (failOpen with the server unreachable). */
  unprotected: boolean;
  /** `value` as UTF-8 text. */
  text(): string;
}

/** The effect function: does the effect once and returns its result (bytes, a string, or nothing). */
export type EffectFn = (signal: AbortSignal) => Promise<BytesLike | void | undefined> | BytesLike | void | undefined;

/** The scope or key of an effect is empty, longer than 256 bytes, or not UTF-8. The effect did not run. */
export class InvalidEffectKeyError extends InvalidFieldError {}

const decoder = new TextDecoder();

function result(value: Uint8Array, replayed: boolean, unprotected: boolean): EffectResult {
  return { value, replayed, unprotected, text: () => decoder.decode(value) };
}

function checkName(field: string, v: string): void {
  let why: string | undefined;
  if (typeof v !== "string" || v === "") why = `${field} is empty`;
  else if (!isWellFormed(v)) why = `${field} is not valid UTF-8`;
  else if (utf8Length(v) > 256) why = `${field} is ${utf8Length(v)} bytes, the limit is 256`;
  if (why) {
    throw new InvalidEffectKeyError(Reason.InvalidField, `effect: invalid scope or key: ${why}; the effect did not run`, {
      metadata: { field },
    });
  }
}

/** A copy of `e`, of the same class, with `prefix` before its message. */
function prefixed(e: SeppError, prefix: string): SeppError {
  const ctor = e.constructor as new (...a: ConstructorParameters<typeof SeppError>) => SeppError;
  return new ctor(e.reason, `${prefix}${e.rawMessage}`, { code: e.code, metadata: { ...e.errorMetadata }, index: e.index, cause: e });
}

/**
 * Effect keys on one client: `new Effects(client)`, or with defaults of
 * your own, `new Effects(client, { ttlMs: 7 * 86400_000 })`. It depends on
 * the client, never the reverse, so the client has no effect property.
 */
export class Effects {
  /** Runs of `fn` without a claim (failOpen with the server unreachable), per scope. */
  readonly unprotectedRuns = new Map<string, number>();

  /**
   * @param client - the client whose EffectService is used.
   * @param defaults - options applied to every call, under the call's own.
   */
  constructor(
    private readonly client: SeppClient,
    private readonly defaults: EffectOptions = {},
  ) {}

  /**
   * Runs `fn` at most once for `(scope, key)` within the record's TTL and
   * returns its result; a repeat returns the stored result without running
   * `fn`. An error thrown by `fn` releases the claim (so a retry can run it)
   * and is rethrown as it is.
   *
   * @param scope - the kind of effect, e.g. `"mail.invoice"`: 1 to 256 bytes of UTF-8.
   * @param key - the effect's identity, e.g. `"order-9.invoice"`: 1 to 256 bytes of UTF-8.
   * @param fn - does the effect; gets a signal that aborts if the claim is lost or the call is aborted.
   * @param options - mode, TTL, lease, failOpen, signal.
   * @throws {@link InvalidEffectKeyError} for a bad scope or key, {@link EffectInProgressError}
   *   in raise mode, {@link UnavailableError} when the server cannot be reached (fail closed).
   */
  async do(scope: string, key: string, fn: EffectFn, options: EffectOptions = {}): Promise<EffectResult> {
    // In a span sepp.effect <scope> inside a traced handler (tracing.ts).
    return tracedEffect(scope, key, fn, (f) => this.doEffect(scope, key, f, options));
  }

  private async doEffect(scope: string, key: string, fn: EffectFn, options: EffectOptions): Promise<EffectResult> {
    const o = { ...this.defaults, ...options };
    const ttlMs = o.ttlMs && o.ttlMs > 0 ? o.ttlMs : 24 * 3600_000;
    const leaseMs = o.leaseMs && o.leaseMs > 0 ? o.leaseMs : 30_000;
    const waitTimeoutMs = o.waitTimeoutMs && o.waitTimeoutMs > 0 ? o.waitTimeoutMs : 30_000;
    const mode = o.mode ?? "wait";
    const logger = o.logger ?? defaultLogger;
    checkName("scope", scope);
    checkName("key", key);
    for (;;) {
      let claim;
      try {
        claim = await this.client.claimEffect(
          { scope, key, ttlMs, leaseMs, waitMs: mode === "wait" ? waitTimeoutMs : 0 },
          { signal: o.signal },
        );
      } catch (err) {
        if (o.signal?.aborted) throw err;
        const e = toSeppError(err);
        if (o.failOpen && e instanceof UnavailableError) {
          logger.warn("effect server unreachable: running the effect UNPROTECTED (failOpen)", { scope, key, err: e.message });
          this.unprotectedRuns.set(scope, (this.unprotectedRuns.get(scope) ?? 0) + 1);
          const v = await fn(o.signal ?? new AbortController().signal);
          return result(toBytes(v ?? undefined), false, true);
        }
        throw prefixed(e, `effect ${scope}/${key} not run: `);
      }
      if (claim.state === "completed") return result(claim.result, true, false);
      if (claim.state === "in_progress") {
        if (mode === "raise") {
          const until = claim.leaseExpiresAt ? ` until ${claim.leaseExpiresAt.toISOString()}` : "";
          throw new EffectInProgressError(Reason.EffectInProgress, `effect ${scope}/${key} is being run by another holder${until}: retry later`);
        }
        continue; // the wait ended with the holder still running: claim again
      }
      return this.run(claim.token, leaseMs, fn, o.signal);
    }
  }

  /**
   * {@link Effects.do} for a result stored and replayed as JSON.
   *
   * @param scope - the kind of effect.
   * @param key - the effect's identity.
   * @param fn - does the effect and returns a JSON-serialisable value.
   * @param options - as for do.
   */
  async doJSON<T>(scope: string, key: string, fn: (signal: AbortSignal) => Promise<T> | T, options: EffectOptions = {}): Promise<T> {
    const res = await this.do(scope, key, async (signal) => JSON.stringify(await fn(signal)), options);
    const text = res.text();
    return (text === "" ? undefined : JSON.parse(text)) as T;
  }

  /** Runs fn under an acquired claim, extending its lease, then completes or releases it. */
  private async run(token: string, leaseMs: number, fn: EffectFn, signal?: AbortSignal): Promise<EffectResult> {
    const ac = new AbortController();
    const onAbort = () => ac.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    let extending: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      extending = this.client.extendEffectLease(token, leaseMs, { signal: ac.signal }).catch((err) => {
        if (err instanceof LeaseLostError) {
          clearInterval(timer);
          // fn finds out when it completes; abort tells it sooner.
          ac.abort(err);
        }
      });
    }, Math.max(leaseMs / 3, 10));
    let value: Uint8Array;
    try {
      value = toBytes((await fn(ac.signal)) ?? undefined);
    } catch (err) {
      clearInterval(timer);
      signal?.removeEventListener("abort", onAbort);
      await extending;
      try {
        await this.client.releaseEffect(token);
      } catch (rerr) {
        if (!(rerr instanceof LeaseLostError)) {
          throw new AggregateError([err, rerr], `the effect failed, and releasing its claim failed too: ${String(rerr)}`);
        }
      }
      throw err;
    }
    clearInterval(timer);
    signal?.removeEventListener("abort", onAbort);
    await extending;
    try {
      value = await this.client.completeEffect(token, value);
    } catch (err) {
      // The effect ran but its record is not stored (the lease ended, or the
      // server stayed gone through the client's resends): a later claim may
      // run it again.
      throw prefixed(toSeppError(err), "effect ran, but its result could not be recorded: ");
    }
    return result(value, false, false);
  }
}
