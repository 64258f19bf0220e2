/**
 * Local checks of idempotency keys and effect keys, the same as the
 * server's: 1 to 256 bytes of UTF-8, counted in bytes, no character reserved.
 * The client checks before sending so that a bad key fails fast and nothing
 * is sent; the server checks again and decides.
 *
 * @module
 */
import { IdempotencyKeyEmptyError, IdempotencyKeyTooLongError, InvalidFieldError, Reason } from "./errors.js";

/** The server's default `max_idempotency_key_bytes`. */
export const DEFAULT_MAX_KEY_BYTES = 256;

const encoder = new TextEncoder();

/**
 * The length of `s` in bytes of UTF-8, as the server counts it.
 *
 * @param s - a string.
 */
export function utf8Length(s: string): number {
  return encoder.encode(s).length;
}

/**
 * Whether `s` is valid UTF-8 once encoded, i.e. holds no lone surrogate
 * (which TextEncoder would silently turn into U+FFFD, sending a different key).
 *
 * @param s - a string.
 */
export function isWellFormed(s: string): boolean {
  const f = (s as { isWellFormed?: () => boolean }).isWellFormed;
  if (typeof f === "function") return f.call(s);
  // Node 20 has String.prototype.isWellFormed; this is for older browsers.
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const n = s.charCodeAt(i + 1);
      if (!(n >= 0xdc00 && n <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return false;
  }
  return true;
}

/**
 * Checks an idempotency key the way the server does and throws the server's
 * error for a bad one: {@link IdempotencyKeyEmptyError} for `""`,
 * {@link IdempotencyKeyTooLongError} past `maxBytes` UTF-8 bytes, and
 * {@link InvalidFieldError} for a string that is not valid Unicode.
 *
 * @param key - the key.
 * @param maxBytes - the limit in bytes; 0 or less: no length check.
 */
export function checkIdempotencyKey(key: string, maxBytes: number = DEFAULT_MAX_KEY_BYTES): void {
  if (typeof key !== "string") {
    throw new InvalidFieldError(Reason.InvalidField, `idempotency_key: must be a string, not ${typeof key}`, {
      metadata: { field: "idempotency_key" },
    });
  }
  if (key === "") {
    throw new IdempotencyKeyEmptyError(
      Reason.IdempotencyKeyEmpty,
      "idempotency key is empty: leave idempotencyKey undefined for no key, or give a stable id such as the entity or event id",
    );
  }
  if (!isWellFormed(key)) {
    throw new InvalidFieldError(Reason.InvalidField, "idempotency_key: is not valid UTF-8 (it holds a lone surrogate); keys are UTF-8 strings", {
      metadata: { field: "idempotency_key" },
    });
  }
  const n = utf8Length(key);
  if (maxBytes > 0 && n > maxBytes) {
    throw new IdempotencyKeyTooLongError(
      Reason.IdempotencyKeyTooLong,
      `idempotency key is ${n} bytes; the limit is ${maxBytes} (max_idempotency_key_bytes): use a shorter, stable id such as the entity or event id`,
    );
  }
}
