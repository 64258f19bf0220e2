/// Job is one unit of work.
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Job {
    #[prost(string, tag="1")]
    pub job_id: ::prost::alloc::string::String,
    #[prost(string, tag="2")]
    pub queue: ::prost::alloc::string::String,
    #[prost(string, tag="3")]
    pub job_type: ::prost::alloc::string::String,
    #[prost(bytes="vec", tag="4")]
    pub payload: ::prost::alloc::vec::Vec<u8>,
    #[prost(string, optional, tag="5")]
    pub idempotency_key: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(int32, tag="6")]
    pub priority: i32,
    #[prost(message, optional, tag="7")]
    pub run_at: ::core::option::Option<::prost_types::Timestamp>,
    #[prost(int32, tag="8")]
    pub max_attempts: i32,
    /// Deliveries so far; counts up on every reserve.
    #[prost(int32, tag="9")]
    pub attempts: i32,
    #[prost(btree_map="string, string", tag="10")]
    pub headers: ::prost::alloc::collections::BTreeMap<::prost::alloc::string::String, ::prost::alloc::string::String>,
    #[prost(enumeration="JobState", tag="11")]
    pub state: i32,
    #[prost(message, optional, tag="12")]
    pub created_at: ::core::option::Option<::prost_types::Timestamp>,
    /// When the job reached COMPLETED, DEAD or CANCELLED.
    #[prost(message, optional, tag="13")]
    pub finalized_at: ::core::option::Option<::prost_types::Timestamp>,
    /// The result passed to Complete, if any.
    #[prost(bytes="vec", tag="14")]
    pub result: ::prost::alloc::vec::Vec<u8>,
    /// The error of the last failed attempt, or why the job is dead.
    #[prost(string, tag="15")]
    pub last_error: ::prost::alloc::string::String,
    /// A follow-up (when_running = "run_again") that waits: the running job
    /// whose end it waits for. Empty otherwise.
    #[prost(string, tag="16")]
    pub follows_job_id: ::prost::alloc::string::String,
    /// The job's key under its queue's \[queues.concurrency\] and \[queues.rate\],
    /// on queues that have them (JSON of the key fields' values; "" for a
    /// whole-queue limit).
    #[prost(string, tag="17")]
    pub concurrency_key: ::prost::alloc::string::String,
    #[prost(string, tag="18")]
    pub rate_key: ::prost::alloc::string::String,
    /// Why a job whose run-at has come is not delivered yet, if it is held.
    #[prost(enumeration="JobHold", tag="19")]
    pub held_by: i32,
    /// With JOB_HOLD_RATE: when its key's rate window has room again.
    #[prost(message, optional, tag="20")]
    pub held_until: ::core::option::Option<::prost_types::Timestamp>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct EnqueueRequest {
    #[prost(string, tag="1")]
    pub queue: ::prost::alloc::string::String,
    #[prost(string, tag="2")]
    pub job_type: ::prost::alloc::string::String,
    #[prost(bytes="vec", tag="3")]
    pub payload: ::prost::alloc::vec::Vec<u8>,
    /// Optional so that an explicitly empty key (an error) can be told from no key.
    #[prost(string, optional, tag="4")]
    pub idempotency_key: ::core::option::Option<::prost::alloc::string::String>,
    /// Higher runs first. Default 0.
    #[prost(int32, tag="5")]
    pub priority: i32,
    /// Not before this time. Unset: now.
    #[prost(message, optional, tag="6")]
    pub run_at: ::core::option::Option<::prost_types::Timestamp>,
    /// 0: the queue's max_attempts.
    #[prost(int32, tag="7")]
    pub max_attempts: i32,
    #[prost(btree_map="string, string", tag="8")]
    pub headers: ::prost::alloc::collections::BTreeMap<::prost::alloc::string::String, ::prost::alloc::string::String>,
}
/// EnqueueResponse is the ack. deduplicated = true means "this enqueue is
/// already accounted for": job_id names the original job, which may since have
/// run, been dead-lettered or been deleted by retention.
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct EnqueueResponse {
    #[prost(string, tag="1")]
    pub job_id: ::prost::alloc::string::String,
    #[prost(bool, tag="2")]
    pub deduplicated: bool,
    /// On a hit: the stored payload fingerprint differs from this request's.
    #[prost(bool, tag="3")]
    pub payload_mismatch: bool,
    /// On a hit: when the original job was enqueued.
    #[prost(message, optional, tag="4")]
    pub original_enqueued_at: ::core::option::Option<::prost_types::Timestamp>,
    /// For keyed enqueues: when the dedup record stops being honoured.
    #[prost(message, optional, tag="5")]
    pub dedup_expires_at: ::core::option::Option<::prost_types::Timestamp>,
    /// On a hit on a queue with on_duplicate = "replace" or "debounce": the
    /// original job, still waiting, took this request's payload, headers,
    /// priority and run-at (debounce: its run-at moved).
    #[prost(bool, tag="6")]
    pub replaced: bool,
    /// The idempotency key this enqueue was judged by: the request's, or the
    /// one the server derived from the payload on a queue with key_fields.
    /// Empty for an enqueue without a key.
    #[prost(string, tag="7")]
    pub idempotency_key: ::prost::alloc::string::String,
    /// On a queue with when_running = "run_again", a hit whose original was
    /// running created this follow-up (job_id, deduplicated = false), which
    /// runs once the job named here has ended.
    #[prost(string, tag="8")]
    pub follows_job_id: ::prost::alloc::string::String,
    /// A \[[queues.rules]\] rule with action = "delay" found its window full:
    /// the job was accepted and runs at this time, the first moment the
    /// window has room.
    #[prost(message, optional, tag="9")]
    pub delayed_until: ::core::option::Option<::prost_types::Timestamp>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct EnqueueBatchRequest {
    #[prost(message, repeated, tag="1")]
    pub jobs: ::prost::alloc::vec::Vec<EnqueueRequest>,
    #[prost(bool, tag="2")]
    pub atomic: bool,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct EnqueueBatchResponse {
    /// One result per job, in request order.
    #[prost(message, repeated, tag="1")]
    pub results: ::prost::alloc::vec::Vec<EnqueueBatchResult>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct EnqueueBatchResult {
    #[prost(oneof="enqueue_batch_result::Outcome", tags="1, 2")]
    pub outcome: ::core::option::Option<enqueue_batch_result::Outcome>,
}
/// Nested message and enum types in `EnqueueBatchResult`.
pub mod enqueue_batch_result {
    #[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Outcome {
        #[prost(message, tag="1")]
        Ack(super::EnqueueResponse),
        #[prost(message, tag="2")]
        Error(super::BatchItemError),
    }
}
/// BatchItemError is why one job of a non-atomic batch was not enqueued.
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct BatchItemError {
    /// The Connect code name, e.g. "invalid_argument".
    #[prost(string, tag="1")]
    pub code: ::prost::alloc::string::String,
    /// The stable reason, e.g. "IDEMPOTENCY_KEY_TOO_LONG".
    #[prost(string, tag="2")]
    pub reason: ::prost::alloc::string::String,
    #[prost(string, tag="3")]
    pub message: ::prost::alloc::string::String,
    /// The reason's detail, as the ErrorInfo of a whole call's error has it:
    /// e.g. "job_id" of DUPLICATE_JOB; "rule", "job_id" and "frees_at" of
    /// DEDUP_RULE_VIOLATED; "pointer" of an INVALID_FIELD in derived keys.
    #[prost(btree_map="string, string", tag="4")]
    pub metadata: ::prost::alloc::collections::BTreeMap<::prost::alloc::string::String, ::prost::alloc::string::String>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct GetJobRequest {
    #[prost(string, tag="1")]
    pub job_id: ::prost::alloc::string::String,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct GetJobResponse {
    #[prost(message, optional, tag="1")]
    pub job: ::core::option::Option<Job>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CancelJobRequest {
    #[prost(string, tag="1")]
    pub job_id: ::prost::alloc::string::String,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CancelJobResponse {
    #[prost(message, optional, tag="1")]
    pub job: ::core::option::Option<Job>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct LookupIdempotencyKeyRequest {
    #[prost(string, tag="1")]
    pub queue: ::prost::alloc::string::String,
    /// The key to look up; or leave it empty and give the payload.
    #[prost(string, tag="2")]
    pub idempotency_key: ::prost::alloc::string::String,
    /// On a queue with key_fields, in place of idempotency_key: the payload
    /// an enqueue would send; the server derives the key from it as an
    /// enqueue's would be.
    #[prost(bytes="vec", tag="3")]
    pub payload: ::prost::alloc::vec::Vec<u8>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct LookupIdempotencyKeyResponse {
    /// False when no live record exists (never enqueued, expired or released).
    #[prost(bool, tag="1")]
    pub found: bool,
    #[prost(string, tag="2")]
    pub job_id: ::prost::alloc::string::String,
    #[prost(message, optional, tag="3")]
    pub first_enqueued_at: ::core::option::Option<::prost_types::Timestamp>,
    #[prost(message, optional, tag="4")]
    pub expires_at: ::core::option::Option<::prost_types::Timestamp>,
    /// Enqueues deduplicated against this record so far.
    #[prost(int64, tag="5")]
    pub hits: i64,
    /// The job's current state, or JOB_STATE_DELETED when the job is gone.
    #[prost(enumeration="JobState", tag="6")]
    pub state: i32,
    /// The job's result, if it completed with one.
    #[prost(bytes="vec", tag="7")]
    pub result: ::prost::alloc::vec::Vec<u8>,
    /// The queue's dedup policy as it decides now, when it is not the
    /// default, e.g. `on_duplicate=reject key_fields=\["/account","/amount"\]`;
    /// empty for a queue with the default policy.
    #[prost(string, tag="8")]
    pub policy: ::prost::alloc::string::String,
    /// The key looked up: the request's, or the one derived from its payload.
    #[prost(string, tag="9")]
    pub idempotency_key: ::prost::alloc::string::String,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReleaseIdempotencyKeyRequest {
    #[prost(string, tag="1")]
    pub queue: ::prost::alloc::string::String,
    /// The key to release; or leave it empty and give the payload.
    #[prost(string, tag="2")]
    pub idempotency_key: ::prost::alloc::string::String,
    /// On a queue with key_fields, in place of idempotency_key: the payload
    /// an enqueue would send; the server derives the key from it.
    #[prost(bytes="vec", tag="3")]
    pub payload: ::prost::alloc::vec::Vec<u8>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReleaseIdempotencyKeyResponse {
    /// False when there was no live record to release.
    #[prost(bool, tag="1")]
    pub released: bool,
    /// The job the released record pointed to.
    #[prost(string, tag="2")]
    pub job_id: ::prost::alloc::string::String,
    /// The key released: the request's, or the one derived from its payload.
    #[prost(string, tag="3")]
    pub idempotency_key: ::prost::alloc::string::String,
}
/// JobState is where a job is in its lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum JobState {
    Unspecified = 0,
    /// Waiting for run_at, or for the backoff after a failed attempt.
    Scheduled = 1,
    /// Ready to be reserved by a worker.
    Available = 2,
    /// Leased to a worker.
    Reserved = 3,
    Completed = 4,
    /// Dead-lettered: attempts ran out, or a failure was permanent.
    Dead = 5,
    Cancelled = 6,
    /// The job itself is gone (retention), but its dedup record still lives.
    Deleted = 7,
}
impl JobState {
    /// String value of the enum field names used in the ProtoBuf definition.
    ///
    /// The values are not transformed in any way and thus are considered stable
    /// (if the ProtoBuf definition does not change) and safe for programmatic use.
    pub fn as_str_name(&self) -> &'static str {
        match self {
            JobState::Unspecified => "JOB_STATE_UNSPECIFIED",
            JobState::Scheduled => "JOB_STATE_SCHEDULED",
            JobState::Available => "JOB_STATE_AVAILABLE",
            JobState::Reserved => "JOB_STATE_RESERVED",
            JobState::Completed => "JOB_STATE_COMPLETED",
            JobState::Dead => "JOB_STATE_DEAD",
            JobState::Cancelled => "JOB_STATE_CANCELLED",
            JobState::Deleted => "JOB_STATE_DELETED",
        }
    }
    /// Creates an enum from field names used in the ProtoBuf definition.
    pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
        match value {
            "JOB_STATE_UNSPECIFIED" => Some(Self::Unspecified),
            "JOB_STATE_SCHEDULED" => Some(Self::Scheduled),
            "JOB_STATE_AVAILABLE" => Some(Self::Available),
            "JOB_STATE_RESERVED" => Some(Self::Reserved),
            "JOB_STATE_COMPLETED" => Some(Self::Completed),
            "JOB_STATE_DEAD" => Some(Self::Dead),
            "JOB_STATE_CANCELLED" => Some(Self::Cancelled),
            "JOB_STATE_DELETED" => Some(Self::Deleted),
            _ => None,
        }
    }
}
/// JobHold is what holds back a job whose run-at has come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum JobHold {
    Unspecified = 0,
    /// A follow-up waiting for the running job it follows to end.
    FollowUp = 1,
    /// Its concurrency key has limit jobs reserved (or, with ordered, an
    /// earlier job of the key has not finished).
    Concurrency = 2,
    /// Its rate key had limit jobs reserved within the period.
    Rate = 3,
}
impl JobHold {
    /// String value of the enum field names used in the ProtoBuf definition.
    ///
    /// The values are not transformed in any way and thus are considered stable
    /// (if the ProtoBuf definition does not change) and safe for programmatic use.
    pub fn as_str_name(&self) -> &'static str {
        match self {
            JobHold::Unspecified => "JOB_HOLD_UNSPECIFIED",
            JobHold::FollowUp => "JOB_HOLD_FOLLOW_UP",
            JobHold::Concurrency => "JOB_HOLD_CONCURRENCY",
            JobHold::Rate => "JOB_HOLD_RATE",
        }
    }
    /// Creates an enum from field names used in the ProtoBuf definition.
    pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
        match value {
            "JOB_HOLD_UNSPECIFIED" => Some(Self::Unspecified),
            "JOB_HOLD_FOLLOW_UP" => Some(Self::FollowUp),
            "JOB_HOLD_CONCURRENCY" => Some(Self::Concurrency),
            "JOB_HOLD_RATE" => Some(Self::Rate),
            _ => None,
        }
    }
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ListQueuesRequest {
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ListQueuesResponse {
    #[prost(message, repeated, tag="1")]
    pub queues: ::prost::alloc::vec::Vec<QueueInfo>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct QueueInfo {
    #[prost(string, tag="1")]
    pub name: ::prost::alloc::string::String,
    #[prost(int64, tag="2")]
    pub scheduled: i64,
    #[prost(int64, tag="3")]
    pub available: i64,
    #[prost(int64, tag="4")]
    pub reserved: i64,
    #[prost(int64, tag="5")]
    pub completed: i64,
    #[prost(int64, tag="6")]
    pub dead: i64,
    #[prost(int64, tag="7")]
    pub cancelled: i64,
    /// Live dedup records (inside their window).
    #[prost(int64, tag="8")]
    pub dedup_records: i64,
    #[prost(bool, tag="9")]
    pub paused: bool,
    /// Jobs whose run-at has come that are held back (counted in scheduled):
    /// follow-ups waiting for the job they follow, and jobs held by their
    /// key's \[queues.concurrency\] or \[queues.rate\].
    #[prost(int64, tag="10")]
    pub held_follow_up: i64,
    #[prost(int64, tag="11")]
    pub held_concurrency: i64,
    #[prost(int64, tag="12")]
    pub held_rate: i64,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ListJobsRequest {
    #[prost(string, tag="1")]
    pub queue: ::prost::alloc::string::String,
    #[prost(enumeration="JobState", tag="2")]
    pub state: i32,
    #[prost(int32, tag="3")]
    pub page_size: i32,
    #[prost(string, tag="4")]
    pub page_token: ::prost::alloc::string::String,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ListJobsResponse {
    #[prost(message, repeated, tag="1")]
    pub jobs: ::prost::alloc::vec::Vec<Job>,
    #[prost(string, tag="2")]
    pub next_page_token: ::prost::alloc::string::String,
}
/// Selects dead jobs by queue, by id, or all of them.
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RequeueDeadJobsRequest {
    #[prost(string, tag="1")]
    pub queue: ::prost::alloc::string::String,
    #[prost(string, repeated, tag="2")]
    pub job_ids: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
    #[prost(bool, tag="3")]
    pub all: bool,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RequeueDeadJobsResponse {
    #[prost(int64, tag="1")]
    pub requeued: i64,
    /// missing_job_ids are the request's job_ids that named no dead job (of
    /// queue, when given) when the call ran: unknown, deleted, or in another
    /// state. Nothing was done to them; the others were requeued.
    #[prost(string, repeated, tag="2")]
    pub missing_job_ids: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PurgeDeadJobsRequest {
    #[prost(string, tag="1")]
    pub queue: ::prost::alloc::string::String,
    #[prost(string, repeated, tag="2")]
    pub job_ids: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
    #[prost(bool, tag="3")]
    pub all: bool,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PurgeDeadJobsResponse {
    #[prost(int64, tag="1")]
    pub purged: i64,
    /// missing_job_ids are the request's job_ids that named no dead job (of
    /// queue, when given) when the call ran: unknown, deleted, or in another
    /// state. Nothing was done to them; the others were purged.
    #[prost(string, repeated, tag="2")]
    pub missing_job_ids: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PauseQueueRequest {
    #[prost(string, tag="1")]
    pub queue: ::prost::alloc::string::String,
    /// create pauses a queue the server does not know: one neither declared in
    /// \[[queues]\] nor holding jobs, dedup records or a pause flag (none that
    /// ListQueues lists). Without it such a queue is refused with UNKNOWN_QUEUE,
    /// as most likely a mistyped name. Set it to pause a queue before its first
    /// job.
    #[prost(bool, tag="2")]
    pub create: bool,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PauseQueueResponse {
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ResumeQueueRequest {
    #[prost(string, tag="1")]
    pub queue: ::prost::alloc::string::String,
    /// create resumes a queue the server does not know (see
    /// PauseQueueRequest.create), which is not paused: without it the call is
    /// refused with UNKNOWN_QUEUE.
    #[prost(bool, tag="2")]
    pub create: bool,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ResumeQueueResponse {
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ListOutboxesRequest {
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ListOutboxesResponse {
    /// The \[[outboxes]\] this node relays, in config order.
    #[prost(message, repeated, tag="1")]
    pub outboxes: ::prost::alloc::vec::Vec<OutboxInfo>,
}
/// OutboxInfo is one outbox as this node's relay last saw it.
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct OutboxInfo {
    #[prost(string, tag="1")]
    pub name: ::prost::alloc::string::String,
    /// "postgres", "mysql" or "sqlite".
    #[prost(string, tag="2")]
    pub dialect: ::prost::alloc::string::String,
    #[prost(string, tag="3")]
    pub table: ::prost::alloc::string::String,
    /// Age of the oldest row not yet relayed, in milliseconds, at checked_at;
    /// 0 when the table was empty.
    #[prost(int64, tag="4")]
    pub lag_ms: i64,
    /// Rows this node relayed into jobs, and moved to the dead table, since it
    /// started.
    #[prost(int64, tag="5")]
    pub relayed: i64,
    #[prost(int64, tag="6")]
    pub dead: i64,
    /// When the relay last read the table; unset before its first read.
    #[prost(message, optional, tag="7")]
    pub checked_at: ::core::option::Option<::prost_types::Timestamp>,
    /// The last pass's error (database unreachable, Sepp refusing for a
    /// while); empty when the last pass succeeded.
    #[prost(string, tag="8")]
    pub last_error: ::prost::alloc::string::String,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ListSchedulesRequest {
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ListSchedulesResponse {
    /// The \[[schedules]\] of this node's configuration, in config order.
    #[prost(message, repeated, tag="1")]
    pub schedules: ::prost::alloc::vec::Vec<ScheduleInfo>,
}
/// ScheduleInfo is one \[[schedules]\] entry and its stored state, which every
/// node sharing the store shares.
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ScheduleInfo {
    #[prost(string, tag="1")]
    pub name: ::prost::alloc::string::String,
    /// As configured: five cron fields, a descriptor such as "@hourly", or
    /// "@every 30s".
    #[prost(string, tag="2")]
    pub cron: ::prost::alloc::string::String,
    /// The IANA zone the cron fields are read in ("UTC" when not set).
    #[prost(string, tag="3")]
    pub timezone: ::prost::alloc::string::String,
    #[prost(string, tag="4")]
    pub queue: ::prost::alloc::string::String,
    #[prost(string, tag="5")]
    pub job_type: ::prost::alloc::string::String,
    /// "none", "last" or "all".
    #[prost(string, tag="6")]
    pub catch_up: ::prost::alloc::string::String,
    /// The latest tick whose job exists (enqueued by any node); unset before
    /// the first.
    #[prost(message, optional, tag="7")]
    pub last_tick: ::core::option::Option<::prost_types::Timestamp>,
    /// The next tick to fire.
    #[prost(message, optional, tag="8")]
    pub next_tick: ::core::option::Option<::prost_types::Timestamp>,
    /// The job of last_tick, when this node knows it.
    #[prost(string, tag="9")]
    pub last_job_id: ::prost::alloc::string::String,
    /// This node's last error firing a tick; empty after a success.
    #[prost(string, tag="10")]
    pub last_error: ::prost::alloc::string::String,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CreateBackupRequest {
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CreateBackupResponse {
    /// Names the copy in ReadBackupFile and DeleteBackup.
    #[prost(string, tag="1")]
    pub backup_id: ::prost::alloc::string::String,
    #[prost(message, optional, tag="2")]
    pub manifest: ::core::option::Option<BackupManifest>,
}
/// BackupManifest describes a backup: what made it, when, what it holds, and
/// every file with its size and SHA-256, so a restore can verify it. sepp
/// backup writes it as manifest.json (protojson) beside the files.
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct BackupManifest {
    /// "sepp-backup/1".
    #[prost(string, tag="1")]
    pub format: ::prost::alloc::string::String,
    /// The version of the server that made it.
    #[prost(string, tag="2")]
    pub server_version: ::prost::alloc::string::String,
    #[prost(message, optional, tag="3")]
    pub created_at: ::core::option::Option<::prost_types::Timestamp>,
    /// The store's schema version.
    #[prost(int64, tag="4")]
    pub schema_version: i64,
    /// The acknowledgement mark the copy holds: the group commits, and the jobs
    /// they created, up to the moment of the copy.
    #[prost(int64, tag="5")]
    pub acked_commits: i64,
    #[prost(int64, tag="6")]
    pub acked_jobs: i64,
    /// Jobs by state and live dedup records, per queue, in the copy.
    #[prost(message, repeated, tag="7")]
    pub queues: ::prost::alloc::vec::Vec<QueueInfo>,
    #[prost(message, repeated, tag="8")]
    pub files: ::prost::alloc::vec::Vec<BackupFile>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct BackupFile {
    /// Relative to the backup's root, with forward slashes.
    #[prost(string, tag="1")]
    pub path: ::prost::alloc::string::String,
    #[prost(int64, tag="2")]
    pub size: i64,
    /// Lowercase hex.
    #[prost(string, tag="3")]
    pub sha256: ::prost::alloc::string::String,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReadBackupFileRequest {
    #[prost(string, tag="1")]
    pub backup_id: ::prost::alloc::string::String,
    #[prost(string, tag="2")]
    pub path: ::prost::alloc::string::String,
    #[prost(int64, tag="3")]
    pub offset: i64,
    /// At most this many bytes (default and maximum 1 MiB).
    #[prost(int32, tag="4")]
    pub max_bytes: i32,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReadBackupFileResponse {
    #[prost(bytes="vec", tag="1")]
    pub data: ::prost::alloc::vec::Vec<u8>,
    /// Set when data ends at the end of the file.
    #[prost(bool, tag="2")]
    pub eof: bool,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct DeleteBackupRequest {
    #[prost(string, tag="1")]
    pub backup_id: ::prost::alloc::string::String,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct DeleteBackupResponse {
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ClaimEffectRequest {
    #[prost(string, tag="1")]
    pub scope: ::prost::alloc::string::String,
    #[prost(string, tag="2")]
    pub key: ::prost::alloc::string::String,
    #[prost(int64, tag="3")]
    pub ttl_ms: i64,
    #[prost(int64, tag="4")]
    pub lease_ms: i64,
    #[prost(int64, tag="5")]
    pub wait_ms: i64,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ClaimEffectResponse {
    #[prost(enumeration="ClaimOutcome", tag="1")]
    pub outcome: i32,
    #[prost(string, tag="2")]
    pub token: ::prost::alloc::string::String,
    #[prost(bytes="vec", tag="3")]
    pub result: ::prost::alloc::vec::Vec<u8>,
    #[prost(message, optional, tag="4")]
    pub lease_expires_at: ::core::option::Option<::prost_types::Timestamp>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CompleteEffectRequest {
    #[prost(string, tag="1")]
    pub token: ::prost::alloc::string::String,
    #[prost(bytes="vec", tag="2")]
    pub result: ::prost::alloc::vec::Vec<u8>,
}
/// CompleteEffectResponse carries the stored result. A repeated CompleteEffect
/// with the token that completed the effect succeeds and returns what the first
/// call stored; any other token gets LEASE_LOST.
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CompleteEffectResponse {
    #[prost(bytes="vec", tag="1")]
    pub result: ::prost::alloc::vec::Vec<u8>,
    #[prost(message, optional, tag="2")]
    pub completed_at: ::core::option::Option<::prost_types::Timestamp>,
    /// True when this token had already completed the effect: nothing changed.
    #[prost(bool, tag="3")]
    pub already_completed: bool,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReleaseEffectRequest {
    #[prost(string, tag="1")]
    pub token: ::prost::alloc::string::String,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReleaseEffectResponse {
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ExtendEffectLeaseRequest {
    #[prost(string, tag="1")]
    pub token: ::prost::alloc::string::String,
    #[prost(int64, tag="2")]
    pub lease_ms: i64,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ExtendEffectLeaseResponse {
    #[prost(message, optional, tag="1")]
    pub lease_expires_at: ::core::option::Option<::prost_types::Timestamp>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct GetEffectRequest {
    #[prost(string, tag="1")]
    pub scope: ::prost::alloc::string::String,
    #[prost(string, tag="2")]
    pub key: ::prost::alloc::string::String,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct GetEffectResponse {
    #[prost(bool, tag="1")]
    pub found: bool,
    #[prost(enumeration="ClaimOutcome", tag="2")]
    pub state: i32,
    #[prost(bytes="vec", tag="3")]
    pub result: ::prost::alloc::vec::Vec<u8>,
    #[prost(message, optional, tag="4")]
    pub completed_at: ::core::option::Option<::prost_types::Timestamp>,
    #[prost(message, optional, tag="5")]
    pub expires_at: ::core::option::Option<::prost_types::Timestamp>,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum ClaimOutcome {
    Unspecified = 0,
    /// The caller holds the effect: run it, then complete or release it.
    Acquired = 1,
    /// The effect already ran: replay the stored result, do not run it again.
    Completed = 2,
    /// Another holder's lease is live.
    InProgress = 3,
}
impl ClaimOutcome {
    /// String value of the enum field names used in the ProtoBuf definition.
    ///
    /// The values are not transformed in any way and thus are considered stable
    /// (if the ProtoBuf definition does not change) and safe for programmatic use.
    pub fn as_str_name(&self) -> &'static str {
        match self {
            ClaimOutcome::Unspecified => "CLAIM_OUTCOME_UNSPECIFIED",
            ClaimOutcome::Acquired => "CLAIM_OUTCOME_ACQUIRED",
            ClaimOutcome::Completed => "CLAIM_OUTCOME_COMPLETED",
            ClaimOutcome::InProgress => "CLAIM_OUTCOME_IN_PROGRESS",
        }
    }
    /// Creates an enum from field names used in the ProtoBuf definition.
    pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
        match value {
            "CLAIM_OUTCOME_UNSPECIFIED" => Some(Self::Unspecified),
            "CLAIM_OUTCOME_ACQUIRED" => Some(Self::Acquired),
            "CLAIM_OUTCOME_COMPLETED" => Some(Self::Completed),
            "CLAIM_OUTCOME_IN_PROGRESS" => Some(Self::InProgress),
            _ => None,
        }
    }
}
/// Reason is the stable reason of a Sepp error: the `reason` of the
/// google.rpc.ErrorInfo detail (domain "sepp.dev") of a call's error, and the
/// `reason` of a BatchItemError. The wire carries the value's name, e.g.
/// "IDEMPOTENCY_KEY_TOO_LONG", never its number. This enum is the one list of
/// reasons: the server's constants and every client's list are generated from
/// it. docs/errors.md says what each means and what to do. Never rename a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum Reason {
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// buf:lint:ignore ENUM_ZERO_VALUE_SUFFIX
    /// Not a reason: the error carried none.
    Unspecified = 0,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// An idempotency key over the limit (max_idempotency_key_bytes, 256 by
    /// default).
    IdempotencyKeyTooLong = 1,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// An idempotency key given but empty.
    IdempotencyKeyEmpty = 2,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// A hit whose payload differs from the original's, on a queue that refuses
    /// mismatches; or a key given where the queue derives keys.
    IdempotencyKeyConflict = 3,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// An enqueue without a key on a queue that requires one.
    IdempotencyKeyRequired = 4,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// A hit on a queue with on_duplicate = "reject"; metadata job_id.
    DuplicateJob = 5,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// A uniqueness rule refused the job; metadata rule, job_id, frees_at.
    DedupRuleViolated = 6,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// A queue the server does not know, in strict mode.
    UnknownQueue = 7,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// A job type the queue does not allow.
    UnknownJobType = 8,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// A payload over the limit.
    PayloadTooLarge = 9,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// A batch over the limit.
    BatchTooLarge = 10,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// A field that is not valid; the message names it.
    InvalidField = 11,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// No job with that id.
    JobNotFound = 12,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// The worker's lease on the job expired or was taken over.
    LeaseLost = 13,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// An effect key another attempt holds; made by the clients' effect
    /// helpers, never sent by the server.
    EffectInProgress = 14,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// No token, or one the server does not know.
    Unauthenticated = 15,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// A token whose roles do not allow the call or the queue.
    PermissionDenied = 16,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// A limit of \[limits\] reached; metadata says which.
    LimitExceeded = 17,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// The server is shutting down or the request ran out of time before its
    /// write was acknowledged; retrying with the same key is safe.
    Unavailable = 18,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// A bug or a storage failure; the message says which.
    Internal = 19,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// Webhook endpoints only: the request's signature is missing, malformed,
    /// wrong, or outside the timestamp tolerance. Nothing was written.
    SignatureInvalid = 20,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// Webhook endpoints only: a method other than POST.
    MethodNotAllowed = 21,
    /// buf:lint:ignore ENUM_VALUE_PREFIX
    /// CreateBackup on a store that cannot copy itself (the PostgreSQL
    /// backend): back its database up with PostgreSQL's own tools.
    BackupUnsupported = 22,
}
impl Reason {
    /// String value of the enum field names used in the ProtoBuf definition.
    ///
    /// The values are not transformed in any way and thus are considered stable
    /// (if the ProtoBuf definition does not change) and safe for programmatic use.
    pub fn as_str_name(&self) -> &'static str {
        match self {
            Reason::Unspecified => "REASON_UNSPECIFIED",
            Reason::IdempotencyKeyTooLong => "IDEMPOTENCY_KEY_TOO_LONG",
            Reason::IdempotencyKeyEmpty => "IDEMPOTENCY_KEY_EMPTY",
            Reason::IdempotencyKeyConflict => "IDEMPOTENCY_KEY_CONFLICT",
            Reason::IdempotencyKeyRequired => "IDEMPOTENCY_KEY_REQUIRED",
            Reason::DuplicateJob => "DUPLICATE_JOB",
            Reason::DedupRuleViolated => "DEDUP_RULE_VIOLATED",
            Reason::UnknownQueue => "UNKNOWN_QUEUE",
            Reason::UnknownJobType => "UNKNOWN_JOB_TYPE",
            Reason::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            Reason::BatchTooLarge => "BATCH_TOO_LARGE",
            Reason::InvalidField => "INVALID_FIELD",
            Reason::JobNotFound => "JOB_NOT_FOUND",
            Reason::LeaseLost => "LEASE_LOST",
            Reason::EffectInProgress => "EFFECT_IN_PROGRESS",
            Reason::Unauthenticated => "UNAUTHENTICATED",
            Reason::PermissionDenied => "PERMISSION_DENIED",
            Reason::LimitExceeded => "LIMIT_EXCEEDED",
            Reason::Unavailable => "UNAVAILABLE",
            Reason::Internal => "INTERNAL",
            Reason::SignatureInvalid => "SIGNATURE_INVALID",
            Reason::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Reason::BackupUnsupported => "BACKUP_UNSUPPORTED",
        }
    }
    /// Creates an enum from field names used in the ProtoBuf definition.
    pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
        match value {
            "REASON_UNSPECIFIED" => Some(Self::Unspecified),
            "IDEMPOTENCY_KEY_TOO_LONG" => Some(Self::IdempotencyKeyTooLong),
            "IDEMPOTENCY_KEY_EMPTY" => Some(Self::IdempotencyKeyEmpty),
            "IDEMPOTENCY_KEY_CONFLICT" => Some(Self::IdempotencyKeyConflict),
            "IDEMPOTENCY_KEY_REQUIRED" => Some(Self::IdempotencyKeyRequired),
            "DUPLICATE_JOB" => Some(Self::DuplicateJob),
            "DEDUP_RULE_VIOLATED" => Some(Self::DedupRuleViolated),
            "UNKNOWN_QUEUE" => Some(Self::UnknownQueue),
            "UNKNOWN_JOB_TYPE" => Some(Self::UnknownJobType),
            "PAYLOAD_TOO_LARGE" => Some(Self::PayloadTooLarge),
            "BATCH_TOO_LARGE" => Some(Self::BatchTooLarge),
            "INVALID_FIELD" => Some(Self::InvalidField),
            "JOB_NOT_FOUND" => Some(Self::JobNotFound),
            "LEASE_LOST" => Some(Self::LeaseLost),
            "EFFECT_IN_PROGRESS" => Some(Self::EffectInProgress),
            "UNAUTHENTICATED" => Some(Self::Unauthenticated),
            "PERMISSION_DENIED" => Some(Self::PermissionDenied),
            "LIMIT_EXCEEDED" => Some(Self::LimitExceeded),
            "UNAVAILABLE" => Some(Self::Unavailable),
            "INTERNAL" => Some(Self::Internal),
            "SIGNATURE_INVALID" => Some(Self::SignatureInvalid),
            "METHOD_NOT_ALLOWED" => Some(Self::MethodNotAllowed),
            "BACKUP_UNSUPPORTED" => Some(Self::BackupUnsupported),
            _ => None,
        }
    }
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReserveRequest {
    #[prost(string, repeated, tag="1")]
    pub queues: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
    #[prost(string, tag="2")]
    pub worker_id: ::prost::alloc::string::String,
    #[prost(int32, tag="3")]
    pub max_jobs: i32,
    #[prost(int64, tag="4")]
    pub lease_ms: i64,
    #[prost(int64, tag="5")]
    pub wait_ms: i64,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReserveResponse {
    #[prost(message, repeated, tag="1")]
    pub jobs: ::prost::alloc::vec::Vec<ReservedJob>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReservedJob {
    #[prost(message, optional, tag="1")]
    pub job: ::core::option::Option<Job>,
    #[prost(string, tag="2")]
    pub lease_token: ::prost::alloc::string::String,
    #[prost(int32, tag="3")]
    pub attempt: i32,
    #[prost(message, optional, tag="4")]
    pub lease_expires_at: ::core::option::Option<::prost_types::Timestamp>,
    /// The length of the lease granted, so a worker can extend it by as much
    /// without comparing clocks.
    #[prost(int64, tag="5")]
    pub lease_ms: i64,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CompleteRequest {
    #[prost(string, tag="1")]
    pub job_id: ::prost::alloc::string::String,
    #[prost(string, tag="2")]
    pub lease_token: ::prost::alloc::string::String,
    #[prost(bytes="vec", tag="3")]
    pub result: ::prost::alloc::vec::Vec<u8>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CompleteResponse {
    /// True when this token had already completed the job (a retried call whose
    /// first answer was lost): nothing changed.
    #[prost(bool, tag="1")]
    pub already_completed: bool,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CompleteBatchRequest {
    #[prost(message, repeated, tag="1")]
    pub completions: ::prost::alloc::vec::Vec<CompleteRequest>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CompleteBatchResponse {
    /// One result per completion, in order.
    #[prost(message, repeated, tag="1")]
    pub results: ::prost::alloc::vec::Vec<CompleteBatchResult>,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CompleteBatchResult {
    /// Unset: completed. Set: why not (LEASE_LOST for a stale token).
    #[prost(message, optional, tag="1")]
    pub error: ::core::option::Option<BatchItemError>,
    /// True when this token had already completed the job: nothing changed.
    #[prost(bool, tag="2")]
    pub already_completed: bool,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct FailRequest {
    #[prost(string, tag="1")]
    pub job_id: ::prost::alloc::string::String,
    #[prost(string, tag="2")]
    pub lease_token: ::prost::alloc::string::String,
    #[prost(string, tag="3")]
    pub error: ::prost::alloc::string::String,
    #[prost(int64, optional, tag="4")]
    pub retry_after_ms: ::core::option::Option<i64>,
    #[prost(bool, tag="5")]
    pub permanent: bool,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct FailResponse {
    #[prost(enumeration="JobState", tag="1")]
    pub state: i32,
    #[prost(message, optional, tag="2")]
    pub next_run_at: ::core::option::Option<::prost_types::Timestamp>,
    /// True when this token had already failed the job (a retried call whose
    /// first answer was lost): nothing changed, and state is the job's state now.
    #[prost(bool, tag="3")]
    pub already_failed: bool,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ExtendLeaseRequest {
    #[prost(string, tag="1")]
    pub job_id: ::prost::alloc::string::String,
    #[prost(string, tag="2")]
    pub lease_token: ::prost::alloc::string::String,
    #[prost(int64, tag="3")]
    pub lease_ms: i64,
}
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ExtendLeaseResponse {
    #[prost(message, optional, tag="1")]
    pub lease_expires_at: ::core::option::Option<::prost_types::Timestamp>,
}
