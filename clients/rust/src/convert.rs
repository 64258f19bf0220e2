//! The generated wire messages to and from the crate's public types, which
//! say in Rust what the messages say in protobuf: `Option<SystemTime>` for a
//! timestamp, [`JobState`] for the enum, `None` for an empty key.

use std::time::{Duration, SystemTime};

use crate::error::{Error, ErrorDetail};
use crate::pb::sepp_v1 as pb;
use crate::pb::sepp_v1::Reason;
use crate::request::{BatchResult, EnqueueAck, EnqueueRequest};
use crate::transport::ms;
use crate::types::*;

fn time(t: Option<prost_types::Timestamp>) -> Option<SystemTime> {
    // A timestamp no SystemTime holds is out of any range Sepp writes.
    t.and_then(|t| SystemTime::try_from(t).ok())
}

fn non_empty(s: String) -> Option<String> {
    if s.is_empty() {
        None
    } else {
        Some(s)
    }
}

impl EnqueueRequest {
    pub(crate) fn to_proto(&self) -> pb::EnqueueRequest {
        pb::EnqueueRequest {
            queue: self.queue.clone(),
            job_type: self.job_type.clone(),
            payload: self.payload.clone(),
            // Some("") is sent as "": the server refuses it, it never means
            // "no key".
            idempotency_key: self.idempotency_key.clone(),
            priority: self.priority,
            run_at: self.run_at.map(Into::into),
            max_attempts: self.max_attempts,
            headers: self.headers.clone(),
        }
    }
}

impl From<pb::EnqueueResponse> for EnqueueAck {
    fn from(r: pb::EnqueueResponse) -> Self {
        EnqueueAck {
            job_id: r.job_id,
            deduplicated: r.deduplicated,
            payload_mismatch: r.payload_mismatch,
            original_enqueued_at: time(r.original_enqueued_at),
            dedup_expires_at: time(r.dedup_expires_at),
            replaced: r.replaced,
            idempotency_key: non_empty(r.idempotency_key),
            follows_job_id: non_empty(r.follows_job_id),
            delayed_until: time(r.delayed_until),
        }
    }
}

/// One job's outcome in an `EnqueueBatch` answer.
pub(crate) fn batch_result(r: pb::EnqueueBatchResult) -> BatchResult {
    match r.outcome {
        Some(pb::enqueue_batch_result::Outcome::Ack(a)) => Ok(a.into()),
        Some(pb::enqueue_batch_result::Outcome::Error(e)) => {
            Err(Error::from_detail(ErrorDetail { reason: e.reason, code: e.code, message: e.message, index: None, metadata: e.metadata }))
        }
        None => Err(Error::new(Reason::Internal, "internal", "server answered a batch item with neither an ack nor an error")),
    }
}

impl JobState {
    pub(crate) fn from_proto(state: i32) -> JobState {
        match pb::JobState::from_i32(state) {
            Some(pb::JobState::Scheduled) => JobState::Scheduled,
            Some(pb::JobState::Available) => JobState::Available,
            Some(pb::JobState::Reserved) => JobState::Reserved,
            Some(pb::JobState::Completed) => JobState::Completed,
            Some(pb::JobState::Dead) => JobState::Dead,
            Some(pb::JobState::Cancelled) => JobState::Cancelled,
            Some(pb::JobState::Deleted) => JobState::Deleted,
            Some(pb::JobState::Unspecified) | None => JobState::Unspecified,
        }
    }

    pub(crate) fn to_proto(self) -> pb::JobState {
        match self {
            JobState::Scheduled => pb::JobState::Scheduled,
            JobState::Available => pb::JobState::Available,
            JobState::Reserved => pb::JobState::Reserved,
            JobState::Completed => pb::JobState::Completed,
            JobState::Dead => pb::JobState::Dead,
            JobState::Cancelled => pb::JobState::Cancelled,
            JobState::Deleted => pb::JobState::Deleted,
            JobState::Unspecified => pb::JobState::Unspecified,
        }
    }
}

impl JobHold {
    /// `None` for `JOB_HOLD_UNSPECIFIED` (nothing holds the job) and for a
    /// hold this client does not know.
    pub(crate) fn from_proto(hold: i32) -> Option<JobHold> {
        match pb::JobHold::from_i32(hold) {
            Some(pb::JobHold::FollowUp) => Some(JobHold::FollowUp),
            Some(pb::JobHold::Concurrency) => Some(JobHold::Concurrency),
            Some(pb::JobHold::Rate) => Some(JobHold::Rate),
            Some(pb::JobHold::Unspecified) | None => None,
        }
    }
}

impl EffectState {
    pub(crate) fn from_proto(outcome: i32) -> EffectState {
        match pb::ClaimOutcome::from_i32(outcome) {
            Some(pb::ClaimOutcome::Acquired) => EffectState::Acquired,
            Some(pb::ClaimOutcome::Completed) => EffectState::Completed,
            _ => EffectState::InProgress,
        }
    }
}

impl From<pb::Job> for Job {
    fn from(j: pb::Job) -> Self {
        Job {
            job_id: j.job_id,
            queue: j.queue,
            job_type: j.job_type,
            payload: j.payload,
            idempotency_key: j.idempotency_key,
            priority: j.priority,
            run_at: time(j.run_at),
            max_attempts: j.max_attempts,
            attempts: j.attempts,
            headers: j.headers,
            state: JobState::from_proto(j.state),
            created_at: time(j.created_at),
            finalized_at: time(j.finalized_at),
            result: j.result,
            last_error: j.last_error,
            follows_job_id: non_empty(j.follows_job_id),
            // The wire has no "unset" for these: "" is both "no limit" and a
            // whole-queue limit's key, which has no fields to name anyway.
            concurrency_key: non_empty(j.concurrency_key),
            rate_key: non_empty(j.rate_key),
            held_by: JobHold::from_proto(j.held_by),
            held_until: time(j.held_until),
        }
    }
}

impl From<pb::LookupIdempotencyKeyResponse> for KeyLookup {
    fn from(r: pb::LookupIdempotencyKeyResponse) -> Self {
        KeyLookup {
            found: r.found,
            job_id: r.job_id,
            first_enqueued_at: time(r.first_enqueued_at),
            expires_at: time(r.expires_at),
            hits: r.hits,
            state: JobState::from_proto(r.state),
            result: r.result,
            idempotency_key: r.idempotency_key,
        }
    }
}

impl From<pb::ReleaseIdempotencyKeyResponse> for KeyRelease {
    fn from(r: pb::ReleaseIdempotencyKeyResponse) -> Self {
        KeyRelease { released: r.released, job_id: r.job_id, idempotency_key: r.idempotency_key }
    }
}

impl From<pb::QueueInfo> for QueueInfo {
    fn from(q: pb::QueueInfo) -> Self {
        QueueInfo {
            name: q.name,
            scheduled: q.scheduled,
            available: q.available,
            reserved: q.reserved,
            completed: q.completed,
            dead: q.dead,
            cancelled: q.cancelled,
            dedup_records: q.dedup_records,
            paused: q.paused,
            held_follow_up: q.held_follow_up,
            held_concurrency: q.held_concurrency,
            held_rate: q.held_rate,
        }
    }
}

impl ListJobsRequest {
    pub(crate) fn to_proto(&self) -> pb::ListJobsRequest {
        pb::ListJobsRequest {
            queue: self.queue.clone(),
            state: self.state.map_or(pb::JobState::Unspecified, JobState::to_proto) as i32,
            page_size: self.page_size,
            page_token: self.page_token.clone(),
        }
    }
}

impl From<pb::ListJobsResponse> for JobPage {
    fn from(r: pb::ListJobsResponse) -> Self {
        JobPage { jobs: r.jobs.into_iter().map(Into::into).collect(), next_page_token: r.next_page_token }
    }
}

impl ReserveRequest {
    pub(crate) fn to_proto(&self) -> pb::ReserveRequest {
        pb::ReserveRequest {
            queues: self.queues.clone(),
            worker_id: self.worker_id.clone(),
            max_jobs: self.max_jobs,
            lease_ms: self.lease.map_or(0, ms),
            wait_ms: ms(self.wait),
        }
    }
}

impl From<pb::ReservedJob> for Reservation {
    fn from(r: pb::ReservedJob) -> Self {
        Reservation {
            job: r.job.unwrap_or_default().into(),
            lease_token: r.lease_token,
            attempt: r.attempt,
            lease_expires_at: time(r.lease_expires_at),
            lease: Duration::from_millis(r.lease_ms.max(0) as u64),
        }
    }
}

impl FailRequest {
    pub(crate) fn to_proto(&self) -> pb::FailRequest {
        pb::FailRequest {
            job_id: self.job_id.clone(),
            lease_token: self.lease_token.clone(),
            error: self.error.clone(),
            retry_after_ms: self.retry_after.map(ms),
            permanent: self.permanent,
        }
    }
}

impl From<pb::FailResponse> for FailOutcome {
    fn from(r: pb::FailResponse) -> Self {
        FailOutcome { state: JobState::from_proto(r.state), next_run_at: time(r.next_run_at), already_failed: r.already_failed }
    }
}

impl ClaimEffectRequest {
    pub(crate) fn to_proto(&self) -> pb::ClaimEffectRequest {
        pb::ClaimEffectRequest {
            scope: self.scope.clone(),
            key: self.key.clone(),
            ttl_ms: self.ttl.map_or(0, ms),
            lease_ms: self.lease.map_or(0, ms),
            wait_ms: ms(self.wait),
        }
    }
}

impl From<pb::ClaimEffectResponse> for EffectClaim {
    fn from(r: pb::ClaimEffectResponse) -> Self {
        EffectClaim {
            state: EffectState::from_proto(r.outcome),
            token: r.token,
            result: r.result,
            lease_expires_at: time(r.lease_expires_at),
        }
    }
}

impl From<pb::CompleteEffectResponse> for EffectCompletion {
    fn from(r: pb::CompleteEffectResponse) -> Self {
        EffectCompletion { result: r.result, completed_at: time(r.completed_at), already_completed: r.already_completed }
    }
}

impl From<pb::GetEffectResponse> for EffectRecord {
    fn from(r: pb::GetEffectResponse) -> Self {
        EffectRecord {
            found: r.found,
            state: if r.found { Some(EffectState::from_proto(r.state)) } else { None },
            result: r.result,
            completed_at: time(r.completed_at),
            expires_at: time(r.expires_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enqueue_request_to_proto() {
        let run_at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_893_553_445);
        let r = EnqueueRequest::new("q", "t")
            .unwrap()
            .with_payload(b"hi".to_vec())
            .with_idempotency_key("")
            .with_priority(3)
            .with_max_attempts(2)
            .with_header("a", "b")
            .with_run_at(run_at);
        let p = r.to_proto();
        assert_eq!((p.queue.as_str(), p.job_type.as_str(), p.payload.as_slice()), ("q", "t", &b"hi"[..]));
        // An empty key is sent, as present and empty, for the server to refuse.
        assert_eq!(p.idempotency_key.as_deref(), Some(""));
        assert_eq!((p.priority, p.max_attempts), (3, 2));
        assert_eq!(p.headers.get("a").map(String::as_str), Some("b"));
        assert_eq!(time(p.run_at), Some(run_at));
        assert_eq!(EnqueueRequest::new("q", "t").unwrap().to_proto().idempotency_key, None);
    }

    #[test]
    fn ack_key_and_batch_results() {
        let ack: EnqueueAck = pb::EnqueueResponse { job_id: "j1".into(), ..Default::default() }.into();
        assert_eq!(ack.idempotency_key, None, "an unkeyed enqueue's ack has no key");
        let ack: EnqueueAck = pb::EnqueueResponse { job_id: "j1".into(), idempotency_key: "k".into(), ..Default::default() }.into();
        assert_eq!(ack.idempotency_key.as_deref(), Some("k"));
        assert_eq!((ack.follows_job_id, ack.delayed_until), (None, None), "absent unless the server sets them");
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_893_553_445);
        let ack: EnqueueAck =
            pb::EnqueueResponse { job_id: "j2".into(), follows_job_id: "j1".into(), delayed_until: Some(at.into()), ..Default::default() }
                .into();
        assert_eq!((ack.follows_job_id.as_deref(), ack.delayed_until), (Some("j1"), Some(at)));

        let item = pb::EnqueueBatchResult {
            outcome: Some(pb::enqueue_batch_result::Outcome::Error(pb::BatchItemError {
                code: "already_exists".into(),
                reason: "DUPLICATE_JOB".into(),
                message: "m".into(),
                metadata: [("job_id".to_string(), "j0".to_string())].into_iter().collect(),
            })),
        };
        let e = batch_result(item).unwrap_err();
        assert!(matches!(&e, Error::DuplicateJob(d) if d.metadata["job_id"] == "j0"), "{e:?}");
        assert!(matches!(batch_result(pb::EnqueueBatchResult { outcome: None }), Err(Error::Internal(_))));
    }

    #[test]
    fn job_states_both_ways() {
        for s in [
            JobState::Scheduled,
            JobState::Available,
            JobState::Reserved,
            JobState::Completed,
            JobState::Dead,
            JobState::Cancelled,
            JobState::Deleted,
            JobState::Unspecified,
        ] {
            assert_eq!(JobState::from_proto(s.to_proto() as i32), s);
            assert_eq!(s.to_proto().as_str_name(), s.as_proto_name());
        }
        assert_eq!(JobState::from_proto(99), JobState::Unspecified);
    }

    #[test]
    fn job_holds() {
        for (p, want) in [
            (pb::JobHold::Unspecified, None),
            (pb::JobHold::FollowUp, Some(JobHold::FollowUp)),
            (pb::JobHold::Concurrency, Some(JobHold::Concurrency)),
            (pb::JobHold::Rate, Some(JobHold::Rate)),
        ] {
            assert_eq!(JobHold::from_proto(p as i32), want);
            if let Some(h) = want {
                // "follow_up" for JOB_HOLD_FOLLOW_UP, and so on.
                assert_eq!(format!("JOB_HOLD_{}", h.as_str().to_ascii_uppercase()), p.as_str_name());
            }
        }
        assert_eq!(JobHold::from_proto(99), None, "a hold newer than this client");
        let j: Job = pb::Job { held_by: pb::JobHold::FollowUp as i32, follows_job_id: "j1".into(), ..Default::default() }.into();
        assert_eq!(
            (j.held_by, j.follows_job_id.as_deref(), j.concurrency_key, j.held_until),
            (Some(JobHold::FollowUp), Some("j1"), None, None)
        );
    }
}
