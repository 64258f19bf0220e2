//! The error type: one variant per reason the server (or the client's own
//! checks) can give.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::pb::sepp_v1::Reason;

/// The result of every fallible call in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

// The variants for the server's reasons, each named as the generated
// `Reason` value it stands for (prost writes IDEMPOTENCY_KEY_TOO_LONG as
// IdempotencyKeyTooLong), so the reason strings come from the enum, never
// from a copy in this crate. `reasons_are_the_enums` fails when the enum has
// a value no variant stands for, or the list a value the enum lacks.
macro_rules! server_reasons {
    ($($(#[$doc:meta])* $reason:ident,)*) => {
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
            $($(#[$doc])* $reason(ErrorDetail),)*
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

        /// The reasons a variant stands for, in the order declared.
        #[cfg(test)]
        const SERVER_REASONS: &[Reason] = &[$(Reason::$reason),*];

        impl Error {
            /// The variant for a reason the server sends; `None` for the
            /// reasons no Sepp call answers with (REASON_UNSPECIFIED, and the
            /// webhook endpoints' SIGNATURE_INVALID and METHOD_NOT_ALLOWED).
            fn for_reason(reason: Reason, d: ErrorDetail) -> std::result::Result<Error, ErrorDetail> {
                match reason {
                    $(Reason::$reason => Ok(Error::$reason(d)),)*
                    _ => Err(d),
                }
            }

            /// The detail of a server (or local-check) error; `None` for
            /// [`Error::Transport`] and [`Error::Config`].
            pub fn detail(&self) -> Option<&ErrorDetail> {
                match self {
                    $(Error::$reason(d) => Some(d),)*
                    Error::Other(d) => Some(d),
                    Error::Transport(_) | Error::Config(_) => None,
                }
            }

            pub(crate) fn detail_mut(&mut self) -> Option<&mut ErrorDetail> {
                match self {
                    $(Error::$reason(d) => Some(d),)*
                    Error::Other(d) => Some(d),
                    Error::Transport(_) | Error::Config(_) => None,
                }
            }

            /// The generated `Reason` this variant stands for; `None` for
            /// [`Error::Transport`], [`Error::Config`] and [`Error::Other`].
            #[cfg(test)]
            fn reason_code(&self) -> Option<Reason> {
                match self {
                    $(Error::$reason(_) => Some(Reason::$reason),)*
                    Error::Other(_) | Error::Transport(_) | Error::Config(_) => None,
                }
            }
        }
    };
}

server_reasons! {
    /// `IDEMPOTENCY_KEY_TOO_LONG`: the key is longer than
    /// `max_idempotency_key_bytes` (256 by default), counted in bytes of
    /// UTF-8, not characters. The seed documentation's `IdempotencyKeyTooLong`.
    IdempotencyKeyTooLong,
    /// `IDEMPOTENCY_KEY_EMPTY`: a key is present but empty. An empty key is
    /// never taken as "no key": leave the key out to enqueue without dedup.
    IdempotencyKeyEmpty,
    /// `IDEMPOTENCY_KEY_CONFLICT`: the key is recorded with a different job
    /// type or payload on a queue with `key_reuse = "reject_mismatch"`.
    IdempotencyKeyConflict,
    /// `IDEMPOTENCY_KEY_REQUIRED`: the queue has `require_key = true` and the
    /// enqueue had no key, given or derived.
    IdempotencyKeyRequired,
    /// `UNKNOWN_QUEUE`: the queue is not declared and the server runs with
    /// `strict = true`. Metadata `queue`.
    UnknownQueue,
    /// `UNKNOWN_JOB_TYPE`: the queue's `job_types` do not include the job type.
    UnknownJobType,
    /// `PAYLOAD_TOO_LARGE`: the payload (or a result) exceeds `max_payload_bytes`.
    PayloadTooLarge,
    /// `BATCH_TOO_LARGE`: more jobs than `max_batch_size` in one batch.
    BatchTooLarge,
    /// `INVALID_FIELD`: another field is malformed; the message (and the
    /// metadata `field`) names it.
    InvalidField,
    /// `JOB_NOT_FOUND`: no job has this id (it never existed, or retention
    /// deleted it).
    JobNotFound,
    /// `LEASE_LOST`: the lease token no longer holds the lease (of a job or of
    /// an effect claim). Stop working: another holder owns it.
    LeaseLost,
    /// `EFFECT_IN_PROGRESS`: another holder is running the effect (raise mode).
    /// Retry later; the next attempt replays the holder's result.
    EffectInProgress,
    /// `DUPLICATE_JOB`: a dedup hit on a queue with `on_duplicate = "reject"`;
    /// metadata `job_id` names the original.
    DuplicateJob,
    /// `DEDUP_RULE_VIOLATED`: a `[[queues.rules]]` rule with `action =
    /// "reject"` found its limit of jobs enqueued on the queue within its
    /// window; metadata `rule`, `limit`, `frees_at` (when the window has
    /// room), and, when the limit is 1, `job_id` (the job that holds it).
    DedupRuleViolated,
    /// `UNAUTHENTICATED`: no bearer token, or one that matches none.
    Unauthenticated,
    /// `PERMISSION_DENIED`: the token's roles or queues do not cover this call.
    PermissionDenied,
    /// `LIMIT_EXCEEDED`: a server limit; the message names the config key.
    LimitExceeded,
    /// `UNAVAILABLE`: the server answered that it could not finish the call
    /// (shutting down, deadline exceeded). The outcome is unknown: resend with
    /// the same idempotency key.
    Unavailable,
    /// `INTERNAL`: the server failed; the message says why.
    Internal,
    /// `BACKUP_UNSUPPORTED`: a backup asked of a server whose store cannot
    /// copy itself (the PostgreSQL backend): back its database up with
    /// PostgreSQL's own tools.
    BackupUnsupported,
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

    /// The variant for one of the server's reasons, made by the client.
    pub(crate) fn new(reason: Reason, code: &str, message: impl Into<String>) -> Error {
        Error::from_reason(reason.as_str_name(), code, message)
    }

    pub(crate) fn from_detail(d: ErrorDetail) -> Error {
        match Reason::from_str_name(&d.reason) {
            Some(reason) => Error::for_reason(reason, d).unwrap_or_else(Error::Other),
            None => Error::Other(d),
        }
    }

    /// A local check's error, as the server would have answered it.
    pub(crate) fn local(reason: Reason, message: impl Into<String>) -> Error {
        Error::new(reason, "invalid_argument", message)
    }

    pub(crate) fn invalid_field(field: &str, message: impl fmt::Display) -> Error {
        let mut e = Error::local(Reason::InvalidField, format!("{field}: {message}"));
        if let Some(d) = e.detail_mut() {
            d.metadata.insert("field".into(), field.into());
        }
        e
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
    ///
    /// This is the one rule of which errors are resent (see
    /// [`retry`](crate::retry)): `UNAVAILABLE` only, and no answer at all,
    /// which is `UNAVAILABLE` too in the shared retry policy.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value of the generated enum, the numbers it was given being
    /// small and dense (0 to 21 today).
    fn every_reason() -> Vec<Reason> {
        (0..=i32::from(u16::MAX)).filter_map(Reason::from_i32).collect()
    }

    /// Not reasons a call of the client's can get: no reason at all, and
    /// the answers of the webhook endpoints, which only webhook senders call.
    const NOT_FOR_CLIENTS: [Reason; 3] = [Reason::Unspecified, Reason::SignatureInvalid, Reason::MethodNotAllowed];

    #[test]
    fn reasons_are_the_enums() {
        let enum_reasons: Vec<Reason> = every_reason().into_iter().filter(|r| !NOT_FOR_CLIENTS.contains(r)).collect();
        assert!(enum_reasons.len() > 10, "the generated enum has only {enum_reasons:?}");
        let missing: Vec<&str> = enum_reasons.iter().filter(|r| !SERVER_REASONS.contains(r)).map(|r| r.as_str_name()).collect();
        assert!(missing.is_empty(), "sepp.v1.Reason has {missing:?}, which Error has no variant for: add them to server_reasons!");
        let extra: Vec<&str> = SERVER_REASONS.iter().filter(|r| !enum_reasons.contains(r)).map(|r| r.as_str_name()).collect();
        assert!(extra.is_empty(), "Error has variants for {extra:?}, which no Sepp call answers with");
        let mut seen = SERVER_REASONS.to_vec();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), SERVER_REASONS.len(), "a reason is listed twice in server_reasons!");

        // Each reason's string, as the server sends it, gives its variant,
        // which gives the string back.
        for reason in &enum_reasons {
            let name = reason.as_str_name();
            let e = Error::from_reason(name, "x", "m");
            assert_eq!(e.reason_code(), Some(*reason), "{name} gives {e:?}");
            assert_eq!(e.reason(), name);
            assert_eq!(e.to_string(), format!("sepp: {name}: m"));
        }
        for reason in NOT_FOR_CLIENTS {
            assert!(matches!(Error::from_reason(reason.as_str_name(), "x", "m"), Error::Other(_)), "{reason:?}");
        }
        assert!(matches!(Error::from_reason("SOMETHING_NEW", "x", "m"), Error::Other(_)));
    }

    #[test]
    fn only_unavailable_and_no_answer_are_retryable() {
        for reason in every_reason() {
            let e = Error::from_reason(reason.as_str_name(), "x", "m");
            assert_eq!(e.is_retryable(), reason == Reason::Unavailable, "{reason:?}");
        }
        assert!(Error::Transport(TransportError::new("no answer".into(), false, None)).is_retryable());
        assert!(!Error::Config("bad".into()).is_retryable());
    }
}
