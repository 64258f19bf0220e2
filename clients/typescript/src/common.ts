/**
 * Everything both entry points (`sepp` for Node, `sepp/browser`) export.
 *
 * @module
 */
export {
  SeppClient,
  setDefaultTransportFactory,
  type BatchOptions,
  type BatchingOptions,
  type CallOptions,
  type ConnectOptions,
  type PauseOptions,
  type Protocol,
  type RetryOptions,
  type TlsOptions,
  type TransportFactory,
} from "./client.js";
export * from "./errors.js";
export { checkIdempotencyKey, utf8Length, DEFAULT_MAX_KEY_BYTES } from "./keys.js";
export { retryDelay } from "./retry.js";
export {
  bytesToText,
  toBytes,
  type Ack,
  type BatchResult,
  type BytesLike,
  type ClaimEffectRequest,
  type Completion,
  type DeadJobs,
  type EffectClaim,
  type EffectRecord,
  type EffectState,
  type EnqueueRequest,
  type FailOptions,
  type FailResult,
  type Job,
  type JobHold,
  type JobState,
  type KeyLookup,
  type KeyRelease,
  type OutboxInfo,
  type ScheduleInfo,
  type QueueInfo,
  type Reservation,
  type ReserveRequest,
} from "./types.js";
export {
  Effects,
  InvalidEffectKeyError,
  defaultLogger,
  type EffectFn,
  type EffectOptions,
  type EffectResult,
  type InFlightMode,
  type Logger,
} from "./effect.js";
export {
  PermanentError,
  RetryAfterError,
  Worker,
  permanent,
  retryAfter,
  type Handler,
  type WorkerJob,
  type WorkerOptions,
} from "./worker.js";
