//! What a producer sends and gets back: [`EnqueueRequest`] and [`EnqueueAck`].

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::pb::sepp_v1::Reason;

/// The longest queue name or job type the server accepts, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// The default `max_idempotency_key_bytes` of the server, and the length the
/// client checks before sending unless told otherwise
/// ([`ClientBuilder::max_idempotency_key_bytes`](crate::client::ClientBuilder::max_idempotency_key_bytes)).
pub const DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES: usize = 256;

/// One job to enqueue, built with `with_*` methods.
///
/// ```
/// use std::time::Duration;
/// use sepp_rs::EnqueueRequest;
///
/// let request = EnqueueRequest::new("emails", "receipt")?
///     .with_idempotency_key("receipt-order-8a3f")
///     .with_payload(br#"{"order":"8a3f"}"#.to_vec())
///     .with_priority(10)
///     .with_delay(Duration::from_secs(60))
///     .with_max_attempts(5)
///     .with_header("trace-id", "4bf92f35");
/// assert_eq!(request.idempotency_key(), Some("receipt-order-8a3f"));
///
/// // The queue and the job type are checked at once ...
/// assert!(matches!(EnqueueRequest::new("", "receipt"), Err(sepp_rs::Error::InvalidField(_))));
/// # Ok::<(), sepp_rs::Error>(())
/// ```
///
/// ... and the idempotency key when the request is enqueued, before anything
/// is sent: an empty key fails with [`Error::IdempotencyKeyEmpty`] (it is
/// never taken as "no key"), a key over 256 bytes of UTF-8 with
/// [`Error::IdempotencyKeyTooLong`]. [`EnqueueRequest::validate`] runs the
/// same checks on demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnqueueRequest {
    pub(crate) queue: String,
    pub(crate) job_type: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) priority: i32,
    pub(crate) run_at: Option<SystemTime>,
    pub(crate) max_attempts: i32,
    pub(crate) headers: BTreeMap<String, String>,
}

impl EnqueueRequest {
    /// A job of `job_type` on `queue`, with no payload, no key, priority 0,
    /// to run now with the queue's `max_attempts`.
    ///
    /// Fails with [`Error::InvalidField`] when the queue name is empty, over
    /// 255 bytes, has leading or trailing spaces or a control character, or
    /// the job type is empty or over 255 bytes: the server's rules, checked
    /// here so that the mistake shows where it is made.
    pub fn new(queue: impl Into<String>, job_type: impl Into<String>) -> Result<Self> {
        let queue = queue.into();
        let job_type = job_type.into();
        check_queue_name(&queue)?;
        if job_type.is_empty() {
            return Err(Error::invalid_field("job_type", "is required"));
        }
        if job_type.len() > MAX_NAME_BYTES {
            return Err(Error::invalid_field("job_type", format_args!("is {} bytes; the limit is {}", job_type.len(), MAX_NAME_BYTES)));
        }
        Ok(EnqueueRequest {
            queue,
            job_type,
            payload: Vec::new(),
            idempotency_key: None,
            priority: 0,
            run_at: None,
            max_attempts: 0,
            headers: BTreeMap::new(),
        })
    }

    /// Sets the idempotency key: within the queue's dedup window, a later
    /// enqueue with the same key creates nothing and returns the original
    /// job. Derive it from what the job is about (an order id, an event id).
    ///
    /// The key is checked when the request is enqueued (1 to 256 bytes of
    /// UTF-8, counted in bytes); an empty string is an error there, not "no
    /// key".
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Sets the payload: opaque bytes, up to the server's `max_payload_bytes`
    /// (1 MiB by default).
    pub fn with_payload(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.payload = payload.into();
        self
    }

    /// Sets the priority: higher runs first. Default 0.
    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Delays the job until `run_at`.
    pub fn with_run_at(mut self, run_at: SystemTime) -> Self {
        self.run_at = Some(run_at);
        self
    }

    /// Delays the job by `delay` from now.
    pub fn with_delay(self, delay: Duration) -> Self {
        self.with_run_at(SystemTime::now() + delay)
    }

    /// Overrides the queue's `max_attempts` for this job. 0: the queue's.
    pub fn with_max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Adds a header (up to 64 entries and 64 KiB in all, on the server).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// The queue.
    pub fn queue(&self) -> &str {
        &self.queue
    }
    /// The job type.
    pub fn job_type(&self) -> &str {
        &self.job_type
    }
    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }
    /// The idempotency key, if one was set.
    pub fn idempotency_key(&self) -> Option<&str> {
        self.idempotency_key.as_deref()
    }
    /// The priority.
    pub fn priority(&self) -> i32 {
        self.priority
    }
    /// When the job may run, if delayed.
    pub fn run_at(&self) -> Option<SystemTime> {
        self.run_at
    }
    /// The max attempts override (0: the queue's).
    pub fn max_attempts(&self) -> i32 {
        self.max_attempts
    }
    /// The headers.
    pub fn headers(&self) -> &BTreeMap<String, String> {
        &self.headers
    }

    /// Runs the checks the client makes before sending, with the default key
    /// limit of 256 bytes.
    ///
    /// ```
    /// use sepp_rs::{EnqueueRequest, Error};
    ///
    /// let long = EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("k".repeat(257));
    /// assert!(matches!(long.validate(), Err(Error::IdempotencyKeyTooLong(_))));
    ///
    /// // 129 two-byte characters are 258 bytes: too long, although 129 < 256.
    /// let wide = EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("é".repeat(129));
    /// assert!(matches!(wide.validate(), Err(Error::IdempotencyKeyTooLong(_))));
    ///
    /// let empty = EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("");
    /// assert!(matches!(empty.validate(), Err(Error::IdempotencyKeyEmpty(_))));
    /// # Ok::<(), sepp_rs::Error>(())
    /// ```
    pub fn validate(&self) -> Result<()> {
        self.check(Some(DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES))
    }

    pub(crate) fn check(&self, max_key_bytes: Option<usize>) -> Result<()> {
        if let Some(k) = &self.idempotency_key {
            check_idempotency_key(k, max_key_bytes)?;
        }
        Ok(())
    }
}

/// The server's rules for a queue name (`config.CheckQueueName`).
pub(crate) fn check_queue_name(queue: &str) -> Result<()> {
    if queue.is_empty() {
        return Err(Error::invalid_field("queue", "must not be empty"));
    }
    if queue.len() > MAX_NAME_BYTES {
        return Err(Error::invalid_field("queue", format_args!("is {} bytes; the limit is {}", queue.len(), MAX_NAME_BYTES)));
    }
    if queue.trim() != queue {
        return Err(Error::invalid_field("queue", format_args!("{queue:?} has leading or trailing spaces")));
    }
    if queue.chars().any(char::is_control) {
        return Err(Error::invalid_field("queue", format_args!("{queue:?} contains a control character")));
    }
    Ok(())
}

/// The server's rule for an idempotency key: 1 to `max` bytes of UTF-8.
/// `None` leaves the length to the server (an empty key is still refused).
pub(crate) fn check_idempotency_key(key: &str, max: Option<usize>) -> Result<()> {
    if key.is_empty() {
        return Err(Error::local(
            Reason::IdempotencyKeyEmpty,
            "idempotency key is empty: omit the field to enqueue without dedup, or derive a key from what the job is about",
        ));
    }
    if let Some(max) = max {
        if key.len() > max {
            return Err(Error::local(
                Reason::IdempotencyKeyTooLong,
                format!(
                    "idempotency key is {} bytes; the limit is {} (max_idempotency_key_bytes): use a shorter, stable id such as the entity or event id",
                    key.len(),
                    max
                ),
            ));
        }
    }
    Ok(())
}

/// The server's answer to an enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnqueueAck {
    /// The new job, or on a hit the original job (which may since have run,
    /// been dead-lettered or been deleted by retention).
    pub job_id: String,
    /// True when the key was already recorded: "this enqueue is already
    /// accounted for", and nothing was created.
    pub deduplicated: bool,
    /// On a hit: the original was enqueued with a different job type or
    /// payload (on a queue with the default `key_reuse = "return_original"`).
    pub payload_mismatch: bool,
    /// On a hit: when the original was enqueued.
    pub original_enqueued_at: Option<SystemTime>,
    /// For keyed enqueues: when the dedup record stops being honoured.
    pub dedup_expires_at: Option<SystemTime>,
    /// On a hit on a queue with `on_duplicate = "replace"` or `"debounce"`:
    /// the waiting original took this request's payload, headers, priority
    /// and run-at.
    pub replaced: bool,
    /// The key this enqueue was judged by: the request's, or the one the
    /// server derived from the payload on a queue with `key_fields`. `None`
    /// for an enqueue without a key. Look the job up or release it later
    /// with this key, or by its payload
    /// ([`lookup_idempotency_key_by_payload`](crate::client::SeppClient::lookup_idempotency_key_by_payload)).
    pub idempotency_key: Option<String>,
    /// On a queue with `when_running = "run_again"`: the key's job was
    /// running, so this enqueue created a follow-up (`job_id`,
    /// `deduplicated` false) that runs once the job named here has ended.
    /// `None` otherwise.
    pub follows_job_id: Option<String>,
    /// A `[[queues.rules]]` rule with `action = "delay"` found its window
    /// full: the job was accepted for this time, the first moment the window
    /// has room. `None` otherwise.
    pub delayed_until: Option<SystemTime>,
}

/// The outcome of one job of [`SeppClient::enqueue_batch`](crate::client::SeppClient::enqueue_batch):
/// its ack or its own error.
pub type BatchResult = Result<EnqueueAck, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_rules() {
        assert!(EnqueueRequest::new("emails", "receipt").is_ok());
        for bad in ["", " emails", "emails ", "a\tb", &"q".repeat(256)] {
            let e = EnqueueRequest::new(bad, "t").unwrap_err();
            assert!(matches!(e, Error::InvalidField(_)), "{bad:?}: {e}");
            assert!(e.message().starts_with("queue: "), "{e}");
        }
        assert!(EnqueueRequest::new("q", "").is_err());
        assert!(EnqueueRequest::new("q", "t".repeat(256)).is_err());
        assert!(EnqueueRequest::new("q".repeat(255), "t".repeat(255)).is_ok());
    }

    #[test]
    fn key_bounds_count_bytes() {
        let r = |k: String| EnqueueRequest::new("q", "t").unwrap().with_idempotency_key(k);
        assert!(r("k".repeat(256)).validate().is_ok());
        assert!(r("é".repeat(128)).validate().is_ok());
        assert!(matches!(r("k".repeat(257)).validate(), Err(Error::IdempotencyKeyTooLong(_))));
        let e = r("é".repeat(129)).validate().unwrap_err();
        assert!(e.message().starts_with("idempotency key is 258 bytes; the limit is 256"), "{e}");
        assert!(matches!(r(String::new()).validate(), Err(Error::IdempotencyKeyEmpty(_))));
        // Any character is allowed: colon, slash, space, NUL, emoji.
        assert!(r("a:b/c d\0🦀".into()).validate().is_ok());
    }
}
