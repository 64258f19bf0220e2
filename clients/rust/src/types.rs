//! Jobs, key lookups, queues and effect records as the server reports them.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use crate::error::Error;

/// Where a job is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobState {
    /// Waiting for its run-at time, or for the backoff after a failure.
    Scheduled,
    /// Ready to be reserved by a worker.
    Available,
    /// Leased to a worker.
    Reserved,
    /// Finished.
    Completed,
    /// Dead-lettered: attempts ran out, or a failure was permanent.
    Dead,
    /// Cancelled before it finished.
    Cancelled,
    /// The job is gone (retention) but its dedup record still lives; only
    /// [`KeyLookup::state`] reports it.
    Deleted,
    /// A state this client does not know, or none.
    Unspecified,
}

impl JobState {
    /// The proto enum name, e.g. `"JOB_STATE_COMPLETED"`.
    pub fn as_proto_name(self) -> &'static str {
        self.to_proto().as_str_name()
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.as_proto_name().trim_start_matches("JOB_STATE_").to_ascii_lowercase();
        f.write_str(&s)
    }
}

/// What holds back a job whose run-at has come ([`Job::held_by`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobHold {
    /// A follow-up (`when_running = "run_again"`) waiting for the job it
    /// follows ([`Job::follows_job_id`]) to end.
    FollowUp,
    /// Its concurrency key is at its limit (or, on an ordered queue, an
    /// earlier job of its key has not finished).
    Concurrency,
    /// Its rate key had its limit of jobs reserved within the period; until
    /// [`Job::held_until`].
    Rate,
}

impl JobHold {
    /// `"follow_up"`, `"concurrency"` or `"rate"`, as the Go client and the
    /// CLI name it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobHold::FollowUp => "follow_up",
            JobHold::Concurrency => "concurrency",
            JobHold::Rate => "rate",
        }
    }
}

impl fmt::Display for JobHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A job as the server stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The job id (a UUIDv7).
    pub job_id: String,
    /// The queue.
    pub queue: String,
    /// The job type.
    pub job_type: String,
    /// The payload bytes.
    pub payload: Vec<u8>,
    /// `None` when the job was enqueued without a key.
    pub idempotency_key: Option<String>,
    /// Higher runs first.
    pub priority: i32,
    /// Not before this time.
    pub run_at: Option<SystemTime>,
    /// Deliveries allowed before the job goes dead.
    pub max_attempts: i32,
    /// Deliveries so far.
    pub attempts: i32,
    /// The headers given at enqueue.
    pub headers: BTreeMap<String, String>,
    /// Where the job is now.
    pub state: JobState,
    /// When the job was enqueued.
    pub created_at: Option<SystemTime>,
    /// When the job reached completed, dead or cancelled.
    pub finalized_at: Option<SystemTime>,
    /// The result passed to Complete, if any.
    pub result: Vec<u8>,
    /// The error of the last failed attempt, or why the job is dead.
    pub last_error: String,
    /// A waiting follow-up (`when_running = "run_again"`): the job whose end
    /// it waits for. `None` otherwise.
    pub follows_job_id: Option<String>,
    /// The job's key under its queue's `[queues.concurrency]`: JSON of the
    /// key fields' values. `None` on queues without one, and where the limit
    /// is the whole queue's (no key fields).
    pub concurrency_key: Option<String>,
    /// The job's key under its queue's `[queues.rate]`, as
    /// `concurrency_key` is.
    pub rate_key: Option<String>,
    /// What holds the job back although its run-at has come; `None` when
    /// nothing does. A waiting follow-up is [`JobState::Scheduled`] with
    /// [`JobHold::FollowUp`].
    pub held_by: Option<JobHold>,
    /// With [`JobHold::Rate`]: when its key's rate window has room again.
    pub held_until: Option<SystemTime>,
}

/// What the server knows of an idempotency key: "was this already enqueued,
/// and what became of it?"
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLookup {
    /// False when no live record exists: never enqueued, expired, or released.
    pub found: bool,
    /// The job the record points to.
    pub job_id: String,
    /// When the key was first enqueued.
    pub first_enqueued_at: Option<SystemTime>,
    /// When the record stops being honoured.
    pub expires_at: Option<SystemTime>,
    /// Enqueues deduplicated against this record so far.
    pub hits: i64,
    /// The job's state now, or [`JobState::Deleted`] when it is gone.
    pub state: JobState,
    /// The job's result, if it completed with one.
    pub result: Vec<u8>,
    /// The key looked up: the one given, or the one the server derived from
    /// the payload given
    /// ([`lookup_idempotency_key_by_payload`](crate::client::SeppClient::lookup_idempotency_key_by_payload)).
    pub idempotency_key: String,
}

/// The answer to [`SeppClient::release_idempotency_key`](crate::client::SeppClient::release_idempotency_key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRelease {
    /// False when there was no live record to release.
    pub released: bool,
    /// The job the released record pointed to.
    pub job_id: String,
    /// The key released: the one given, or the one the server derived from
    /// the payload given
    /// ([`release_idempotency_key_by_payload`](crate::client::SeppClient::release_idempotency_key_by_payload)).
    pub idempotency_key: String,
}

/// A queue: its jobs by state, its live dedup records, and whether delivery
/// is paused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueInfo {
    /// The queue name.
    pub name: String,
    /// Jobs scheduled.
    pub scheduled: i64,
    /// Jobs available.
    pub available: i64,
    /// Jobs reserved.
    pub reserved: i64,
    /// Jobs completed.
    pub completed: i64,
    /// Jobs dead.
    pub dead: i64,
    /// Jobs cancelled.
    pub cancelled: i64,
    /// Live dedup records (inside their window).
    pub dedup_records: i64,
    /// Delivery is paused.
    pub paused: bool,
    /// Jobs whose run-at has come held back (counted in `scheduled`):
    /// follow-ups waiting for the job they follow.
    pub held_follow_up: i64,
    /// Jobs held back by their key's `[queues.concurrency]` limit (counted
    /// in `scheduled`).
    pub held_concurrency: i64,
    /// Jobs held back by their key's `[queues.rate]` (counted in
    /// `scheduled`).
    pub held_rate: i64,
}

/// Filters and pages [`SeppClient::list_jobs`](crate::client::SeppClient::list_jobs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListJobsRequest {
    /// Empty: every queue.
    pub queue: String,
    /// `None`: every state.
    pub state: Option<JobState>,
    /// 0: the server's default (100); at most 1000.
    pub page_size: i32,
    /// The previous page's `next_page_token`; empty for the first page.
    pub page_token: String,
}

/// One page of jobs, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobPage {
    /// The jobs of this page.
    pub jobs: Vec<Job>,
    /// Empty on the last page.
    pub next_page_token: String,
}

/// The answer to a claim of an effect key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EffectState {
    /// The caller holds the key: run the effect, then complete or release it.
    Acquired,
    /// The effect already ran: replay its stored result, do not run it.
    Completed,
    /// Another holder's lease is live.
    InProgress,
}

/// A claim of an effect key. Most programs use
/// [`SeppClient::effect`](crate::client::SeppClient::effect), which claims,
/// extends, completes and releases for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimEffectRequest {
    /// The effect's scope, e.g. `"mail.invoice"`: 1 to 256 bytes of UTF-8.
    pub scope: String,
    /// The effect's key, e.g. `"order-9.invoice"`: 1 to 256 bytes of UTF-8.
    pub key: String,
    /// How long the completed record lives. `None`: the server's 24 h.
    pub ttl: Option<Duration>,
    /// How long the claim holds without an extension. `None`: 30 s.
    pub lease: Option<Duration>,
    /// How long the server waits for another holder to finish (at most 5 min).
    pub wait: Duration,
}

impl ClaimEffectRequest {
    /// A claim of `(scope, key)` with the server's defaults and no wait.
    pub fn new(scope: impl Into<String>, key: impl Into<String>) -> Self {
        ClaimEffectRequest { scope: scope.into(), key: key.into(), ttl: None, lease: None, wait: Duration::ZERO }
    }
}

/// The longest effect scope or key, in bytes.
pub const MAX_EFFECT_NAME_BYTES: usize = 256;

/// The one rule on effect scopes and keys: 1 to 256 bytes of UTF-8.
pub(crate) fn check_effect_name(field: &str, v: &str) -> Result<(), Error> {
    if v.is_empty() {
        return Err(Error::invalid_field(
            field,
            "is empty: name the effect, e.g. scope \"mail.invoice\", key \"order-9.invoice\"; the effect did not run",
        ));
    }
    if v.len() > MAX_EFFECT_NAME_BYTES {
        return Err(Error::invalid_field(
            field,
            format_args!(
                "is {} bytes; the limit is {}: use a shorter, stable name of the effect; the effect did not run",
                v.len(),
                MAX_EFFECT_NAME_BYTES
            ),
        ));
    }
    Ok(())
}

/// The server's answer to a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectClaim {
    /// Acquired, completed or in progress.
    pub state: EffectState,
    /// Holds the claim ([`EffectState::Acquired`]).
    pub token: String,
    /// The stored result ([`EffectState::Completed`]).
    pub result: Vec<u8>,
    /// When the holder's lease ends (acquired or in progress).
    pub lease_expires_at: Option<SystemTime>,
}

/// What the server knows of an effect key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectRecord {
    /// False when no record exists.
    pub found: bool,
    /// [`EffectState::Completed`] or [`EffectState::InProgress`] when found.
    pub state: Option<EffectState>,
    /// The stored result (completed).
    pub result: Vec<u8>,
    /// When the effect completed.
    pub completed_at: Option<SystemTime>,
    /// When the completed record expires.
    pub expires_at: Option<SystemTime>,
}

/// A lease request: what [`SeppClient::reserve`](crate::client::SeppClient::reserve)
/// asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReserveRequest {
    /// The queues to take jobs from (at least one).
    pub queues: Vec<String>,
    /// Names this worker in the server's logs.
    pub worker_id: String,
    /// At most this many jobs (0: 1; at most 1000).
    pub max_jobs: i32,
    /// The lease length. `None`: the queue's `lease_ms`.
    pub lease: Option<Duration>,
    /// How long to wait for a job when none is available (at most 5 min).
    pub wait: Duration,
}

/// One job leased to this worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The job.
    pub job: Job,
    /// Holds the lease: complete, fail or extend with it.
    pub lease_token: String,
    /// This delivery's number, from 1.
    pub attempt: i32,
    /// When the lease ends unless extended.
    pub lease_expires_at: Option<SystemTime>,
    /// The lease granted, to extend by as much.
    pub lease: Duration,
}

/// A failed attempt, for [`SeppClient::fail`](crate::client::SeppClient::fail).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailRequest {
    /// The job.
    pub job_id: String,
    /// The lease token from [`Reservation::lease_token`].
    pub lease_token: String,
    /// What went wrong; kept as the job's `last_error`.
    pub error: String,
    /// Retry after this long instead of the queue's backoff.
    pub retry_after: Option<Duration>,
    /// Dead-letter the job now, whatever attempts are left.
    pub permanent: bool,
}

/// What became of a failed job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailOutcome {
    /// [`JobState::Scheduled`] (it will be retried) or [`JobState::Dead`].
    pub state: JobState,
    /// When it runs again, if scheduled.
    pub next_run_at: Option<SystemTime>,
    /// True when this token had already failed the job (a resent call whose
    /// first answer was lost): nothing changed, and `state` is the job's
    /// state now.
    pub already_failed: bool,
}

/// The answer to [`SeppClient::complete_effect`](crate::client::SeppClient::complete_effect):
/// what the server stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectCompletion {
    /// The stored result: this call's, or on a repeat what the first call stored.
    pub result: Vec<u8>,
    /// When the effect completed.
    pub completed_at: Option<SystemTime>,
    /// True when this token had already completed the effect (a resent call
    /// whose first answer was lost): nothing changed.
    pub already_completed: bool,
}
