/**
 * Typed errors: one `ConnectError` subclass per reason the server gives.
 *
 * Every error Sepp's API returns carries a `google.rpc.ErrorInfo` detail with
 * domain `sepp.dev` whose `reason` (e.g. `IDEMPOTENCY_KEY_TOO_LONG`) is
 * stable; the client turns it into an instance of the matching class here, so
 * a caller can write
 *
 * ```ts
 * try {
 *   await client.enqueue(request);
 * } catch (err) {
 *   if (err instanceof IdempotencyKeyTooLongError) { ... }
 *   // or: if (err instanceof SeppError && err.reason === "UNKNOWN_QUEUE")
 * }
 * ```
 *
 * Errors found by the client's own checks before sending (a key too long,
 * an empty key) are the same classes with the same reasons.
 *
 * The reasons are the values of the proto enum `sepp.v1.Reason`, read from
 * the generated `gen/sepp/v1/reason_pb.ts`, and the ErrorInfo detail is
 * decoded by connect-es (`ConnectError.findDetails`) with the generated
 * schema of `google.rpc.ErrorInfo`.
 *
 * @module
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, type ErrorInfo } from "./gen/google/rpc/error_details_pb.js";
import { type Reason as ReasonEnum, ReasonSchema } from "./gen/sepp/v1/reason_pb.js";

/** The ErrorInfo domain of every Sepp error. */
export const ERROR_DOMAIN = "sepp.dev";

/**
 * The values of the proto enum `sepp.v1.Reason` that a client call never
 * gets: the zero value, which is no reason, and the two only webhook
 * endpoints answer with.
 */
const NOT_CLIENT_REASONS = ["REASON_UNSPECIFIED", "SIGNATURE_INVALID", "METHOD_NOT_ALLOWED"] as const;

/**
 * A stable reason of the Sepp API: a value name of the generated enum
 * `sepp.v1.Reason` (proto/sepp/v1/reason.proto, the one list of reasons),
 * less the three a client call never gets.
 */
export type ReasonName = Exclude<keyof typeof ReasonEnum, (typeof NOT_CLIENT_REASONS)[number]>;

/** `IDEMPOTENCY_KEY_TOO_LONG` as `IdempotencyKeyTooLong`, in the type system. */
type PascalCase<S extends string> = S extends `${infer Head}_${infer Rest}`
  ? `${Capitalize<Lowercase<Head>>}${PascalCase<Rest>}`
  : Capitalize<Lowercase<S>>;

/** `IDEMPOTENCY_KEY_TOO_LONG` as `IdempotencyKeyTooLong`, at run time; PascalCase says the same in types. */
function pascalCase(name: string): string {
  return name.toLowerCase().replace(/(?:^|_)([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** The reasons a client call can get, read from the generated enum. */
const clientReasons = ReasonSchema.values
  .map((v) => v.name)
  .filter((name): name is ReasonName => !(NOT_CLIENT_REASONS as readonly string[]).includes(name));

/**
 * The stable reasons of the Sepp API (SPEC §2, docs/errors.md), made from the
 * generated enum `sepp.v1.Reason`: `Reason.IdempotencyKeyTooLong` is
 * `"IDEMPOTENCY_KEY_TOO_LONG"`. Switch on these, not on messages.
 * `UNAVAILABLE` is also what the client reports for a transport error (the
 * server could not be reached, or the connection broke before an answer came
 * back).
 */
export const Reason = Object.freeze(Object.fromEntries(clientReasons.map((name) => [pascalCase(name), name]))) as {
  readonly [K in ReasonName as PascalCase<K>]: K;
};

/** One of the {@link Reason} values, or a reason this client version does not know yet. */
export type ReasonCode = ReasonName | (string & {});

/** Options of {@link SeppError}'s constructor. */
export interface SeppErrorOptions {
  /** The Connect code; defaults to the reason's usual code. */
  code?: Code;
  /** ErrorInfo metadata, e.g. `index` for the failing job of an atomic batch. */
  metadata?: Record<string, string>;
  /** The failing job of an atomic batch (also read from metadata `index`). */
  index?: number;
  /** The error this one was made from. */
  cause?: unknown;
}

/**
 * The base class of every Sepp error: a `ConnectError` (so `instanceof
 * ConnectError` and `err.code` work as with any connect-es client) that also
 * carries the stable {@link SeppError.reason}.
 */
export class SeppError extends ConnectError {
  /** The stable reason, e.g. `"IDEMPOTENCY_KEY_TOO_LONG"`. */
  readonly reason: ReasonCode;
  /** ErrorInfo metadata sent by the server (`index`, `field`, `queue`, `job_id` ...). */
  readonly errorMetadata: Readonly<Record<string, string>>;
  /** The failing job of an atomic batch, or -1. */
  readonly index: number;

  /**
   * @param reason - the stable reason.
   * @param message - what went wrong and what to do (without the `[code]` prefix).
   * @param options - code, metadata, index, cause.
   */
  constructor(reason: ReasonCode, message: string, options: SeppErrorOptions = {}) {
    super(message, options.code ?? defaultCode(reason), undefined, undefined, options.cause);
    this.reason = reason;
    this.errorMetadata = { ...(options.metadata ?? {}) };
    const fromMeta = this.errorMetadata["index"] !== undefined ? Number(this.errorMetadata["index"]) : NaN;
    this.index = options.index ?? (Number.isInteger(fromMeta) ? fromMeta : -1);
  }

  /**
   * Ordinary prototype-chain `instanceof` for Sepp's classes. (ConnectError's
   * own check, which this overrides, recognises errors across copies of
   * connect-es by their shape, and would call every ConnectError an instance
   * of every subclass.)
   */
  static override [Symbol.hasInstance](v: unknown): boolean {
    return Function.prototype[Symbol.hasInstance].call(this, v);
  }
}

function defaultCode(reason: string): Code {
  switch (reason) {
    case Reason.IdempotencyKeyConflict:
    case Reason.DuplicateJob:
      return Code.AlreadyExists;
    case Reason.UnknownQueue:
    case Reason.JobNotFound:
      return Code.NotFound;
    case Reason.LeaseLost:
    case Reason.DedupRuleViolated:
    case Reason.BackupUnsupported:
      return Code.FailedPrecondition;
    case Reason.EffectInProgress:
      return Code.Aborted;
    case Reason.Unauthenticated:
      return Code.Unauthenticated;
    case Reason.PermissionDenied:
      return Code.PermissionDenied;
    case Reason.LimitExceeded:
      return Code.ResourceExhausted;
    case Reason.Unavailable:
      return Code.Unavailable;
    case Reason.Internal:
      return Code.Internal;
  }
  return Code.InvalidArgument;
}

/** The key is longer than the server's `max_idempotency_key_bytes` (256 by default), counted in UTF-8 bytes. */
export class IdempotencyKeyTooLongError extends SeppError {}
/** A key was given but is empty (`""`); an empty key is never taken as "no key". */
export class IdempotencyKeyEmptyError extends SeppError {}
/** The key is recorded with a different job type or payload on a queue with `key_reuse = "reject_mismatch"`. */
export class IdempotencyKeyConflictError extends SeppError {}
/** The queue has `require_key = true` and the enqueue had no key, given or derived. */
export class IdempotencyKeyRequiredError extends SeppError {}
/**
 * The queue is not declared and the server is strict; or `pauseQueue` /
 * `resumeQueue` named a queue the server does not know, without `create`
 * (`errorMetadata.queue` names it).
 */
export class UnknownQueueError extends SeppError {}
/** The queue's `job_types` do not include the job type. */
export class UnknownJobTypeError extends SeppError {}
/** The payload exceeds `max_payload_bytes`. */
export class PayloadTooLargeError extends SeppError {}
/** The batch has more jobs than `max_batch_size`. */
export class BatchTooLargeError extends SeppError {}
/** Another field is malformed; the message (and `errorMetadata.field`) names it. */
export class InvalidFieldError extends SeppError {}
/** No job has this id (or it was deleted by retention or a purge). */
export class JobNotFoundError extends SeppError {}
/**
 * What `requeueDeadJobs` and `purgeDeadJobs` throw when some of the `jobIds`
 * they were given named no dead job (of `queue`, when given): unknown,
 * deleted, or in another state. The others were requeued or purged all the
 * same: {@link NotDeadError.count} says how many. It is a
 * {@link JobNotFoundError} (reason `JOB_NOT_FOUND`), as the Go client's
 * `*sepp.NotDeadError` is `errors.Is(err, sepp.ErrJobNotFound)`.
 *
 * ```ts
 * try {
 *   await client.requeueDeadJobs({ jobIds });
 * } catch (err) {
 *   if (!(err instanceof NotDeadError)) throw err;
 *   console.log(`requeued ${err.count}; no dead job with id ${err.jobIds.join(", ")}`);
 * }
 * ```
 */
export class NotDeadError extends JobNotFoundError {
  /** The ids that named no dead job, each once, in the order given. Nothing was done to them. */
  readonly jobIds: readonly string[];
  /** How many of the other jobs were requeued (or purged). */
  readonly count: number;

  /**
   * @param jobIds - the ids that named no dead job.
   * @param count - how many jobs the call did requeue or purge.
   */
  constructor(jobIds: readonly string[], count: number) {
    super(Reason.JobNotFound, `no dead job with id ${jobIds.join(", ")}`, { code: Code.NotFound });
    this.jobIds = [...jobIds];
    this.count = count;
  }
}
/** The lease token no longer holds the job's (or the effect's) lease. */
export class LeaseLostError extends SeppError {}
/** Another holder is running the effect (the effect helper's `raise` mode). The worker retries such a job after a second. */
export class EffectInProgressError extends SeppError {}
/** A hit on a queue with `on_duplicate = "reject"`; `errorMetadata.job_id` names the original. */
export class DuplicateJobError extends SeppError {}
/**
 * A `[[queues.rules]]` rule with `action = "reject"` found its limit of jobs
 * enqueued on the queue within its window; `errorMetadata` has `rule`,
 * `limit`, `frees_at` (when the window has room), and, when the limit is 1,
 * `job_id` (the job that holds it).
 */
export class DedupRuleViolatedError extends SeppError {}
/** No token, or a token that matches none, while the server's `[auth]` is on. */
export class UnauthenticatedError extends SeppError {}
/** The token's roles or queues do not cover this call. */
export class PermissionDeniedError extends SeppError {}
/** A server limit was reached; the message names the config key. */
export class LimitExceededError extends SeppError {}
/**
 * The server could not be reached, the connection broke before an answer
 * came back, or the server is restarting. The request's fate is unknown: a
 * keyed enqueue is safe to resend with the same key (the client does so by
 * itself, see `ConnectOptions.retries`).
 */
export class UnavailableError extends SeppError {}
/** The server failed; the message says why. */
export class InternalError extends SeppError {}
/**
 * `createBackup` on a server whose store cannot copy itself (the PostgreSQL
 * backend): back its database up with PostgreSQL's own tools.
 */
export class BackupUnsupportedError extends SeppError {}

/** The constructor of {@link SeppError} and of each of its reason classes. */
export type SeppErrorClass = new (reason: ReasonCode, message: string, options?: SeppErrorOptions) => SeppError;

/**
 * The error class of each reason. Its type names every reason of the
 * generated enum, so a reason added to the proto without a class here, or a
 * class for a reason the proto dropped, fails the build.
 */
export const reasonClasses: { readonly [K in ReasonName]: SeppErrorClass } = Object.freeze({
  IDEMPOTENCY_KEY_TOO_LONG: IdempotencyKeyTooLongError,
  IDEMPOTENCY_KEY_EMPTY: IdempotencyKeyEmptyError,
  IDEMPOTENCY_KEY_CONFLICT: IdempotencyKeyConflictError,
  IDEMPOTENCY_KEY_REQUIRED: IdempotencyKeyRequiredError,
  DUPLICATE_JOB: DuplicateJobError,
  DEDUP_RULE_VIOLATED: DedupRuleViolatedError,
  UNKNOWN_QUEUE: UnknownQueueError,
  UNKNOWN_JOB_TYPE: UnknownJobTypeError,
  PAYLOAD_TOO_LARGE: PayloadTooLargeError,
  BATCH_TOO_LARGE: BatchTooLargeError,
  INVALID_FIELD: InvalidFieldError,
  JOB_NOT_FOUND: JobNotFoundError,
  LEASE_LOST: LeaseLostError,
  EFFECT_IN_PROGRESS: EffectInProgressError,
  UNAUTHENTICATED: UnauthenticatedError,
  PERMISSION_DENIED: PermissionDeniedError,
  LIMIT_EXCEEDED: LimitExceededError,
  UNAVAILABLE: UnavailableError,
  INTERNAL: InternalError,
  BACKUP_UNSUPPORTED: BackupUnsupportedError,
} satisfies { readonly [K in ReasonName]: SeppErrorClass });

/**
 * Makes the error class of `reason` (a plain {@link SeppError} for a reason
 * this client does not know).
 *
 * @param reason - the stable reason.
 * @param message - the message, without a `[code]` prefix.
 * @param options - code, metadata, index, cause.
 */
export function newSeppError(reason: ReasonCode, message: string, options: SeppErrorOptions = {}): SeppError {
  const cls = Object.hasOwn(reasonClasses, reason) ? reasonClasses[reason as ReasonName] : SeppError;
  return new cls(reason, message, options);
}

/** The Sepp ErrorInfo of a ConnectError, if the server attached one (a detail that does not decode is skipped). */
function errorInfoOf(err: ConnectError): ErrorInfo | undefined {
  return err.findDetails(ErrorInfoSchema).find((info) => info.reason !== "" && (info.domain === ERROR_DOMAIN || info.domain === ""));
}

/** Codes that, without a Sepp ErrorInfo, mean the request's fate is unknown. */
const transportCodes = new Set<Code>([
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.Aborted,
  Code.Canceled,
  Code.Internal,
  Code.Unknown,
]);

/**
 * Turns anything a connect-es call threw into a {@link SeppError} of the
 * reason's class. A server error keeps its code, message and metadata; an
 * error that did not come from a Sepp server (connection refused or reset, a
 * timeout, a proxy's 503) becomes an {@link UnavailableError}. An error that
 * already is a SeppError is returned as it is.
 *
 * @param err - what a call threw.
 */
export function toSeppError(err: unknown): SeppError {
  if (err instanceof SeppError) return err;
  const ce = ConnectError.from(err);
  const info = errorInfoOf(ce);
  if (info) {
    return newSeppError(info.reason, ce.rawMessage, { code: ce.code, metadata: info.metadata, cause: err });
  }
  if (transportCodes.has(ce.code)) {
    return new UnavailableError(Reason.Unavailable, ce.rawMessage || "the server could not be reached", {
      code: ce.code === Code.DeadlineExceeded ? Code.DeadlineExceeded : Code.Unavailable,
      cause: err,
    });
  }
  switch (ce.code) {
    case Code.NotFound:
      return new JobNotFoundError(Reason.JobNotFound, ce.rawMessage, { code: ce.code, cause: err });
    case Code.Unauthenticated:
      return new UnauthenticatedError(Reason.Unauthenticated, ce.rawMessage, { code: ce.code, cause: err });
    case Code.PermissionDenied:
      return new PermissionDeniedError(Reason.PermissionDenied, ce.rawMessage, { code: ce.code, cause: err });
    case Code.ResourceExhausted:
      return new LimitExceededError(Reason.LimitExceeded, ce.rawMessage, { code: ce.code, cause: err });
  }
  return new InternalError(Reason.Internal, ce.rawMessage, { code: ce.code, cause: err });
}

/**
 * Whether `err` leaves a request's fate unknown (the server may or may not
 * have written it), so that a keyed enqueue should be resent with its key.
 *
 * @param err - an error from this client.
 */
export function isRetryable(err: unknown): boolean {
  return err instanceof SeppError && err.reason === Reason.Unavailable;
}
