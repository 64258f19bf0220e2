//! The error type: one variant per reason the server (or the client's own
//! checks) can give.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The result of every fallible call in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, by the server's stable reason code.
///
/// Every error answered by the server carries a reason (`google.rpc.ErrorInfo`
/// in the Connect error, or the `reason` of a batch item), and each reason has
/// its own variant, so a caller matches on what happened rather than on a
/// message:
///
/// ```
/// use sepp_rs::{EnqueueRequest, Error};
///
/// # async fn demo(client: sepp_rs::client::SeppClient) {
/// let request = EnqueueRequest::new("payments", "charge")
///     .unwrap()
///     .with_idempotency_key("charge-order-77")
///     .with_payload(br#"{"cents":999}"#.to_vec());
/// match client.enqueue(request).await {
///     Ok(ack) => println!("job {}", ack.job_id),
///     Err(Error::IdempotencyKeyConflict(e)) => println!("key reused for another charge: {}", e.message),
///     Err(e) if e.is_retryable() => println!("fate unknown, resend with the same key: {e}"),
///     Err(e) => println!("{e}"),
/// }
/// # }
/// ```
///
/// The variants that come from the server hold an [`ErrorDetail`] with the
/// Connect code, the server's message (written to be acted on) and the
/// `ErrorInfo` metadata. The client's own checks before sending (key length,
/// an empty key, a malformed queue name) produce the same variants with the
/// same messages, and then nothing was sent.
///
/// `Display` is `sepp: REASON: message`, e.g.
/// `sepp: IDEMPOTENCY_KEY_TOO_LONG: idempotency key is 257 bytes; the limit is 256 (max_idempotency_key_bytes): ...`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// `IDEMPOTENCY_KEY_TOO_LONG`: the key is longer than
    /// `max_idempotency_key_bytes` (256 by default), counted in bytes of
    /// UTF-8, not characters. The seed documentation's `IdempotencyKeyTooLong`.
    IdempotencyKeyTooLong(ErrorDetail),
    /// `IDEMPOTENCY_KEY_EMPTY`: a key is present but empty. An empty key is
    /// never taken as "no key": leave the key out to enqueue without dedup.
    IdempotencyKeyEmpty(ErrorDetail),
    /// `IDEMPOTENCY_KEY_CONFLICT`: the key is recorded with a different job
    /// type or payload on a queue with `key_reuse = "reject_mismatch"`.
    IdempotencyKeyConflict(ErrorDetail),
    /// `IDEMPOTENCY_KEY_REQUIRED`: the queue has `require_key = true` and the
    /// enqueue had no key, given or derived.
    IdempotencyKeyRequired(ErrorDetail),
    /// `UNKNOWN_QUEUE`: the queue is not declared and the server runs with
    /// `strict = true`. Metadata `queue`.
    UnknownQueue(ErrorDetail),
    /// `UNKNOWN_JOB_TYPE`: the queue's `job_types` do not include the job type.
    UnknownJobType(ErrorDetail),
    /// `PAYLOAD_TOO_LARGE`: the payload (or a result) exceeds `max_payload_bytes`.
    PayloadTooLarge(ErrorDetail),
    /// `BATCH_TOO_LARGE`: more jobs than `max_batch_size` in one batch.
    BatchTooLarge(ErrorDetail),
    /// `INVALID_FIELD`: another field is malformed; the message (and the
    /// metadata `field`) names it.
    InvalidField(ErrorDetail),
    /// `JOB_NOT_FOUND`: no job has this id (it never existed, or retention
    /// deleted it).
    JobNotFound(ErrorDetail),
    /// `LEASE_LOST`: the lease token no longer holds the lease (of a job or of
    /// an effect claim). Stop working: another holder owns it.
    LeaseLost(ErrorDetail),
    /// `EFFECT_IN_PROGRESS`: another holder is running the effect (raise mode).
    /// Retry later; the next attempt replays the holder's result.
    EffectInProgress(ErrorDetail),
    /// `DUPLICATE_JOB`: a dedup hit on a queue with `on_duplicate = "reject"`;
    /// metadata `job_id` names the original.
    DuplicateJob(ErrorDetail),
    /// `DEDUP_RULE_VIOLATED`: a `[[queues.rules]]` rule matched a job within
    /// its window; metadata `rule`, `job_id`, `frees_at`.
    DedupRuleViolated(ErrorDetail),
    /// `UNAUTHENTICATED`: no bearer token, or one that matches none.
    Unauthenticated(ErrorDetail),
    /// `PERMISSION_DENIED`: the token's roles or queues do not cover this call.
    PermissionDenied(ErrorDetail),
    /// `LIMIT_EXCEEDED`: a server limit; the message names the config key.
    LimitExceeded(ErrorDetail),
    /// `UNAVAILABLE`: the server answered that it could not finish the call
    /// (shutting down, deadline exceeded). The outcome is unknown: resend with
    /// the same idempotency key.
    Unavailable(ErrorDetail),
    /// `INTERNAL`: the server failed; the message says why.
    Internal(ErrorDetail),
    /// The request did not get an answer: the server could not be reached,
    /// the connection broke, or the client's timeout passed. The outcome is
    /// unknown; a keyed enqueue is resent with the same key by the client.
    Transport(TransportError),
    /// The client was configured wrongly (a malformed address, an `https://`
    /// address without a TLS feature, a certificate that does not parse).
    Config(String),
    /// A reason this client does not know (from a newer server), or an
    /// answer without one; `detail.reason` holds what was given.
    Other(ErrorDetail),
}

/// The parts of an error answered by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorDetail {
    /// The stable reason, e.g. `"IDEMPOTENCY_KEY_TOO_LONG"`.
    pub reason: String,
    /// The Connect code name, e.g. `"invalid_argument"`.
    pub code: String,
    /// What went wrong and what to do, as the server (or the client's local
    /// check) wrote it.
    pub message: String,
    /// The failing job of an atomic batch (`ErrorInfo` metadata `index`).
    pub index: Option<usize>,
    /// The rest of the `ErrorInfo` metadata (`queue`, `field`, `job_id`, ...).
    pub metadata: BTreeMap<String, String>,
}

/// Why a request got no answer.
#[derive(Clone)]
pub struct TransportError {
    message: String,
    timeout: bool,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl TransportError {
    pub(crate) fn new(message: String, timeout: bool, source: Option<Arc<dyn std::error::Error + Send + Sync>>) -> Self {
        TransportError { message, timeout, source }
    }
    /// What happened, e.g. `cannot reach the server at http://127.0.0.1:50051: connection refused`.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// True when the client's own timeout passed.
    pub fn is_timeout(&self) -> bool {
        self.timeout
    }
}

impl fmt::Debug for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransportError").field("message", &self.message).field("timeout", &self.timeout).finish()
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error {
    /// Builds the variant for `reason`. Unknown reasons become [`Error::Other`].
    pub fn from_reason(reason: &str, code: &str, message: impl Into<String>) -> Error {
        let d = ErrorDetail {
            reason: reason.to_string(),
            code: code.to_string(),
            message: message.into(),
            index: None,
            metadata: BTreeMap::new(),
        };
        Error::from_detail(d)
    }

    pub(crate) fn from_detail(d: ErrorDetail) -> Error {
        match d.reason.as_str() {
            "IDEMPOTENCY_KEY_TOO_LONG" => Error::IdempotencyKeyTooLong(d),
            "IDEMPOTENCY_KEY_EMPTY" => Error::IdempotencyKeyEmpty(d),
            "IDEMPOTENCY_KEY_CONFLICT" => Error::IdempotencyKeyConflict(d),
            "IDEMPOTENCY_KEY_REQUIRED" => Error::IdempotencyKeyRequired(d),
            "UNKNOWN_QUEUE" => Error::UnknownQueue(d),
            "UNKNOWN_JOB_TYPE" => Error::UnknownJobType(d),
            "PAYLOAD_TOO_LARGE" => Error::PayloadTooLarge(d),
            "BATCH_TOO_LARGE" => Error::BatchTooLarge(d),
            "INVALID_FIELD" => Error::InvalidField(d),
            "JOB_NOT_FOUND" => Error::JobNotFound(d),
            "LEASE_LOST" => Error::LeaseLost(d),
            "EFFECT_IN_PROGRESS" => Error::EffectInProgress(d),
            "DUPLICATE_JOB" => Error::DuplicateJob(d),
            "DEDUP_RULE_VIOLATED" => Error::DedupRuleViolated(d),
            "UNAUTHENTICATED" => Error::Unauthenticated(d),
            "PERMISSION_DENIED" => Error::PermissionDenied(d),
            "LIMIT_EXCEEDED" => Error::LimitExceeded(d),
            "UNAVAILABLE" => Error::Unavailable(d),
            "INTERNAL" => Error::Internal(d),
            _ => Error::Other(d),
        }
    }

    pub(crate) fn local(reason: &str, message: impl Into<String>) -> Error {
        Error::from_reason(reason, "invalid_argument", message)
    }

    pub(crate) fn invalid_field(field: &str, message: impl fmt::Display) -> Error {
        let mut d = ErrorDetail {
            reason: "INVALID_FIELD".into(),
            code: "invalid_argument".into(),
            message: format!("{field}: {message}"),
            index: None,
            metadata: BTreeMap::new(),
        };
        d.metadata.insert("field".into(), field.into());
        Error::InvalidField(d)
    }

    /// The detail of a server (or local-check) error; `None` for
    /// [`Error::Transport`] and [`Error::Config`].
    pub fn detail(&self) -> Option<&ErrorDetail> {
        use Error::*;
        match self {
            IdempotencyKeyTooLong(d)
            | IdempotencyKeyEmpty(d)
            | IdempotencyKeyConflict(d)
            | IdempotencyKeyRequired(d)
            | UnknownQueue(d)
            | UnknownJobType(d)
            | PayloadTooLarge(d)
            | BatchTooLarge(d)
            | InvalidField(d)
            | JobNotFound(d)
            | LeaseLost(d)
            | EffectInProgress(d)
            | DuplicateJob(d)
            | DedupRuleViolated(d)
            | Unauthenticated(d)
            | PermissionDenied(d)
            | LimitExceeded(d)
            | Unavailable(d)
            | Internal(d)
            | Other(d) => Some(d),
            Transport(_) | Config(_) => None,
        }
    }

    pub(crate) fn detail_mut(&mut self) -> Option<&mut ErrorDetail> {
        use Error::*;
        match self {
            IdempotencyKeyTooLong(d)
            | IdempotencyKeyEmpty(d)
            | IdempotencyKeyConflict(d)
            | IdempotencyKeyRequired(d)
            | UnknownQueue(d)
            | UnknownJobType(d)
            | PayloadTooLarge(d)
            | BatchTooLarge(d)
            | InvalidField(d)
            | JobNotFound(d)
            | LeaseLost(d)
            | EffectInProgress(d)
            | DuplicateJob(d)
            | DedupRuleViolated(d)
            | Unauthenticated(d)
            | PermissionDenied(d)
            | LimitExceeded(d)
            | Unavailable(d)
            | Internal(d)
            | Other(d) => Some(d),
            Transport(_) | Config(_) => None,
        }
    }

    /// The reason code: `"IDEMPOTENCY_KEY_TOO_LONG"`, ..., `"TRANSPORT"` for
    /// [`Error::Transport`] and `"CONFIG"` for [`Error::Config`].
    pub fn reason(&self) -> &str {
        match self {
            Error::Transport(_) => "TRANSPORT",
            Error::Config(_) => "CONFIG",
            e => &e.detail().expect("server error has a detail").reason,
        }
    }

    /// The Connect code name (`"invalid_argument"`, ...); `"unavailable"` for
    /// [`Error::Transport`], `"invalid_argument"` for [`Error::Config`].
    pub fn code(&self) -> &str {
        match self {
            Error::Transport(_) => "unavailable",
            Error::Config(_) => "invalid_argument",
            e => &e.detail().expect("server error has a detail").code,
        }
    }

    /// The message a person can act on, without the reason prefix.
    pub fn message(&self) -> &str {
        match self {
            Error::Transport(t) => &t.message,
            Error::Config(m) => m,
            e => &e.detail().expect("server error has a detail").message,
        }
    }

    /// The failing job of an atomic batch.
    pub fn index(&self) -> Option<usize> {
        self.detail().and_then(|d| d.index)
    }

    /// True when the outcome of the call is unknown (no answer, or the server
    /// said `UNAVAILABLE`): a keyed enqueue can be resent with the same key
    /// and is then a hit if the first one was written. The client does this
    /// itself for keyed enqueues.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Transport(_) | Error::Unavailable(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Transport(t) => write!(f, "sepp: {}", t.message),
            Error::Config(m) => write!(f, "sepp: {m}"),
            e => {
                let d = e.detail().expect("server error has a detail");
                write!(f, "sepp: {}: {}", d.reason, d.message)
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Transport(t) => t.source.as_ref().map(|s| &**s as &(dyn std::error::Error + 'static)),
            _ => None,
        }
    }
}

/// Decodes a `google.rpc.ErrorInfo` protobuf message (field 1 reason, 2
/// domain, 3 map<string, string> metadata).
pub(crate) fn decode_error_info(buf: &[u8]) -> Option<(String, BTreeMap<String, String>)> {
    let mut reason = String::new();
    let mut metadata = BTreeMap::new();
    let mut r = ProtoReader { buf, pos: 0 };
    while !r.done() {
        let (field, wire) = r.tag()?;
        match (field, wire) {
            (1, 2) => reason = String::from_utf8(r.bytes()?.to_vec()).ok()?,
            (3, 2) => {
                let entry = r.bytes()?;
                let mut e = ProtoReader { buf: entry, pos: 0 };
                let (mut k, mut v) = (String::new(), String::new());
                while !e.done() {
                    let (f, w) = e.tag()?;
                    match (f, w) {
                        (1, 2) => k = String::from_utf8(e.bytes()?.to_vec()).ok()?,
                        (2, 2) => v = String::from_utf8(e.bytes()?.to_vec()).ok()?,
                        (_, w) => e.skip(w)?,
                    }
                }
                metadata.insert(k, v);
            }
            (_, w) => r.skip(w)?,
        }
    }
    Some((reason, metadata))
}

struct ProtoReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> ProtoReader<'a> {
    fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn tag(&mut self) -> Option<(u64, u64)> {
        let t = self.varint()?;
        Some((t >> 3, t & 7))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.varint()? as usize;
        let end = self.pos.checked_add(n)?;
        let b = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(b)
    }
    fn skip(&mut self, wire: u64) -> Option<()> {
        match wire {
            0 => {
                self.varint()?;
            }
            1 => self.pos += 8,
            2 => {
                self.bytes()?;
            }
            5 => self.pos += 4,
            _ => return None,
        }
        if self.pos > self.buf.len() {
            return None;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_error_info_with_metadata() {
        // From docs/errors.md: IDEMPOTENCY_KEY_EMPTY, domain sepp.dev, index=1.
        let raw = base64::decode_config("ChVJREVNUE9URU5DWV9LRVlfRU1QVFkSCHNlcHAuZGV2GgoKBWluZGV4EgEx", base64::STANDARD_NO_PAD).unwrap();
        let (reason, md) = decode_error_info(&raw).unwrap();
        assert_eq!(reason, "IDEMPOTENCY_KEY_EMPTY");
        assert_eq!(md.get("index").map(String::as_str), Some("1"));
    }

    #[test]
    fn every_reason_has_its_variant() {
        for reason in [
            "IDEMPOTENCY_KEY_TOO_LONG",
            "IDEMPOTENCY_KEY_EMPTY",
            "IDEMPOTENCY_KEY_CONFLICT",
            "IDEMPOTENCY_KEY_REQUIRED",
            "UNKNOWN_QUEUE",
            "UNKNOWN_JOB_TYPE",
            "PAYLOAD_TOO_LARGE",
            "BATCH_TOO_LARGE",
            "INVALID_FIELD",
            "JOB_NOT_FOUND",
            "LEASE_LOST",
            "EFFECT_IN_PROGRESS",
            "DUPLICATE_JOB",
            "DEDUP_RULE_VIOLATED",
            "UNAUTHENTICATED",
            "PERMISSION_DENIED",
            "LIMIT_EXCEEDED",
            "UNAVAILABLE",
            "INTERNAL",
        ] {
            let e = Error::from_reason(reason, "x", "m");
            assert!(!matches!(e, Error::Other(_)), "{reason} has no variant");
            assert_eq!(e.reason(), reason);
            assert_eq!(e.to_string(), format!("sepp: {reason}: m"));
        }
        assert!(matches!(Error::from_reason("SOMETHING_NEW", "x", "m"), Error::Other(_)));
    }
}
