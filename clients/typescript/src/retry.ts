/**
 * The retry policy every Sepp client shares (docs/clients.md, "Retries"),
 * kept with the cases each client's tests check in `clients/retry-policy.json`:
 * a resend waits a full-jitter delay, uniform between zero and a ceiling that
 * doubles from 50 ms up to 2 s, and at most 5 resends follow the first try by
 * default. Only an error whose reason is `UNAVAILABLE` is resent (the
 * request's fate is unknown), and an enqueue only when it carries a key.
 *
 * @module
 */

/** How many resends follow the first try unless `ConnectOptions.retries` says otherwise. */
export const DEFAULT_RETRIES = 5;

/** The ceiling of the first resend's delay, in ms. */
const RETRY_BASE_MS = 50;

/** The largest ceiling, in ms, reached at the sixth resend. */
const RETRY_CAP_MS = 2000;

/**
 * How long the resend after `retry` earlier resends waits, in ms:
 * `random * min(2000, 50 * 2 ** retry)`. Every resend of this client waits
 * `retryDelay(retry, Math.random())`; the function takes the random draw as
 * an argument so that the policy's cases can be checked exactly.
 *
 * @param retry - the resends before this one: 0 for the first.
 * @param random - uniform in [0, 1).
 */
export function retryDelay(retry: number, random: number): number {
  // 2 ** retry becomes Infinity past 1023, which min still caps.
  return random * Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** retry);
}
