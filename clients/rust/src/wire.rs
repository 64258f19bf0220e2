//! The Connect JSON messages (proto3 JSON mapping of `proto/sepp/v1/*.proto`):
//! lowerCamelCase names, int64 as strings, bytes as base64, timestamps as
//! RFC 3339, enums by name.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use crate::request::{EnqueueAck, EnqueueRequest};
use crate::timefmt;
use crate::types::*;

// ---- requests ----

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireEnqueueRequest<'a> {
    queue: &'a str,
    job_type: &'a str,
    #[serde(skip_serializing_if = "<[u8]>::is_empty", serialize_with = "ser_b64")]
    payload: &'a [u8],
    // Some("") is sent as "": the server refuses it, it never means "no key".
    #[serde(skip_serializing_if = "Option::is_none")]
    idempotency_key: Option<&'a str>,
    #[serde(skip_serializing_if = "is_zero")]
    priority: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_at: Option<String>,
    #[serde(skip_serializing_if = "is_zero")]
    max_attempts: i32,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    headers: &'a BTreeMap<String, String>,
}

impl<'a> WireEnqueueRequest<'a> {
    pub(crate) fn from(r: &'a EnqueueRequest) -> Self {
        WireEnqueueRequest {
            queue: &r.queue,
            job_type: &r.job_type,
            payload: &r.payload,
            idempotency_key: r.idempotency_key.as_deref(),
            priority: r.priority,
            run_at: r.run_at.map(timefmt::format),
            max_attempts: r.max_attempts,
            headers: &r.headers,
        }
    }
}

/// Encodes one EnqueueRequest as its JSON object.
pub(crate) fn encode_enqueue(r: &EnqueueRequest) -> Vec<u8> {
    serde_json::to_vec(&WireEnqueueRequest::from(r)).expect("an EnqueueRequest always encodes")
}

/// Builds an EnqueueBatchRequest body from already-encoded jobs.
pub(crate) fn encode_batch<'a>(jobs: impl Iterator<Item = &'a [u8]>, atomic: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(b"{\"jobs\":[");
    for (i, j) in jobs.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(j);
    }
    out.extend_from_slice(b"]");
    if atomic {
        out.extend_from_slice(b",\"atomic\":true");
    }
    out.push(b'}');
    out
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobIdRequest<'a> {
    pub job_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeyRequest<'a> {
    pub queue: &'a str,
    pub idempotency_key: &'a str,
}

#[derive(Serialize)]
pub(crate) struct Empty {}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireListJobsRequest<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    pub queue: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<&'static str>,
    #[serde(skip_serializing_if = "is_zero")]
    pub page_size: i32,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub page_token: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireClaimEffectRequest<'a> {
    pub scope: &'a str,
    pub key: &'a str,
    #[serde(serialize_with = "ser_i64")]
    pub ttl_ms: i64,
    #[serde(serialize_with = "ser_i64")]
    pub lease_ms: i64,
    #[serde(serialize_with = "ser_i64")]
    pub wait_ms: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireCompleteEffectRequest<'a> {
    pub token: &'a str,
    #[serde(skip_serializing_if = "<[u8]>::is_empty", serialize_with = "ser_b64")]
    pub result: &'a [u8],
}

#[derive(Serialize)]
pub(crate) struct TokenRequest<'a> {
    pub token: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireExtendEffectLeaseRequest<'a> {
    pub token: &'a str,
    #[serde(serialize_with = "ser_i64")]
    pub lease_ms: i64,
}

#[derive(Serialize)]
pub(crate) struct ScopeKeyRequest<'a> {
    pub scope: &'a str,
    pub key: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireReserveRequest<'a> {
    pub queues: &'a [String],
    #[serde(skip_serializing_if = "str::is_empty")]
    pub worker_id: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    pub max_jobs: i32,
    #[serde(serialize_with = "ser_i64")]
    pub lease_ms: i64,
    #[serde(serialize_with = "ser_i64")]
    pub wait_ms: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireCompleteRequest<'a> {
    pub job_id: &'a str,
    pub lease_token: &'a str,
    #[serde(skip_serializing_if = "<[u8]>::is_empty", serialize_with = "ser_b64")]
    pub result: &'a [u8],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireFailRequest<'a> {
    pub job_id: &'a str,
    pub lease_token: &'a str,
    pub error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_opt_i64")]
    pub retry_after_ms: Option<i64>,
    pub permanent: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireExtendLeaseRequest<'a> {
    pub job_id: &'a str,
    pub lease_token: &'a str,
    #[serde(serialize_with = "ser_i64")]
    pub lease_ms: i64,
}

// ---- responses ----

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireReserveResponse {
    pub jobs: Vec<WireReservedJob>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireReservedJob {
    job: Option<WireJob>,
    lease_token: String,
    attempt: i32,
    #[serde(deserialize_with = "de_time")]
    lease_expires_at: Option<SystemTime>,
    #[serde(deserialize_with = "de_i64")]
    lease_ms: i64,
}

impl From<WireReservedJob> for Reservation {
    fn from(w: WireReservedJob) -> Self {
        Reservation {
            job: w.job.unwrap_or_default().into(),
            lease_token: w.lease_token,
            attempt: w.attempt,
            lease_expires_at: w.lease_expires_at,
            lease: std::time::Duration::from_millis(w.lease_ms.max(0) as u64),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireFailResponse {
    #[serde(deserialize_with = "de_enum")]
    state: String,
    #[serde(deserialize_with = "de_time")]
    next_run_at: Option<SystemTime>,
    already_failed: bool,
}

impl From<WireFailResponse> for FailOutcome {
    fn from(w: WireFailResponse) -> Self {
        FailOutcome { state: JobState::from_proto(&w.state), next_run_at: w.next_run_at, already_failed: w.already_failed }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireCompleteResponse {
    pub already_completed: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireCompleteEffectResponse {
    #[serde(deserialize_with = "de_b64")]
    result: Vec<u8>,
    #[serde(deserialize_with = "de_time")]
    completed_at: Option<SystemTime>,
    already_completed: bool,
}

impl From<WireCompleteEffectResponse> for EffectCompletion {
    fn from(w: WireCompleteEffectResponse) -> Self {
        EffectCompletion { result: w.result, completed_at: w.completed_at, already_completed: w.already_completed }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireAck {
    job_id: String,
    deduplicated: bool,
    payload_mismatch: bool,
    #[serde(deserialize_with = "de_time")]
    original_enqueued_at: Option<SystemTime>,
    #[serde(deserialize_with = "de_time")]
    dedup_expires_at: Option<SystemTime>,
    replaced: bool,
}

impl From<WireAck> for EnqueueAck {
    fn from(w: WireAck) -> Self {
        EnqueueAck {
            job_id: w.job_id,
            deduplicated: w.deduplicated,
            payload_mismatch: w.payload_mismatch,
            original_enqueued_at: w.original_enqueued_at,
            dedup_expires_at: w.dedup_expires_at,
            replaced: w.replaced,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireBatchResponse {
    pub results: Vec<WireBatchResult>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireBatchResult {
    pub ack: Option<WireAck>,
    pub error: Option<WireItemError>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireItemError {
    pub code: String,
    pub reason: String,
    pub message: String,
    /// The reason's detail, e.g. "job_id" of DUPLICATE_JOB.
    pub metadata: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireJob {
    job_id: String,
    queue: String,
    job_type: String,
    #[serde(deserialize_with = "de_b64")]
    payload: Vec<u8>,
    idempotency_key: Option<String>,
    priority: i32,
    #[serde(deserialize_with = "de_time")]
    run_at: Option<SystemTime>,
    max_attempts: i32,
    attempts: i32,
    headers: BTreeMap<String, String>,
    #[serde(deserialize_with = "de_enum")]
    state: String,
    #[serde(deserialize_with = "de_time")]
    created_at: Option<SystemTime>,
    #[serde(deserialize_with = "de_time")]
    finalized_at: Option<SystemTime>,
    #[serde(deserialize_with = "de_b64")]
    result: Vec<u8>,
    last_error: String,
}

impl From<WireJob> for Job {
    fn from(w: WireJob) -> Self {
        Job {
            job_id: w.job_id,
            queue: w.queue,
            job_type: w.job_type,
            payload: w.payload,
            idempotency_key: w.idempotency_key,
            priority: w.priority,
            run_at: w.run_at,
            max_attempts: w.max_attempts,
            attempts: w.attempts,
            headers: w.headers,
            state: JobState::from_proto(&w.state),
            created_at: w.created_at,
            finalized_at: w.finalized_at,
            result: w.result,
            last_error: w.last_error,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireJobResponse {
    pub job: Option<WireJob>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireLookup {
    found: bool,
    job_id: String,
    #[serde(deserialize_with = "de_time")]
    first_enqueued_at: Option<SystemTime>,
    #[serde(deserialize_with = "de_time")]
    expires_at: Option<SystemTime>,
    #[serde(deserialize_with = "de_i64")]
    hits: i64,
    #[serde(deserialize_with = "de_enum")]
    state: String,
    #[serde(deserialize_with = "de_b64")]
    result: Vec<u8>,
}

impl From<WireLookup> for KeyLookup {
    fn from(w: WireLookup) -> Self {
        KeyLookup {
            found: w.found,
            job_id: w.job_id,
            first_enqueued_at: w.first_enqueued_at,
            expires_at: w.expires_at,
            hits: w.hits,
            state: JobState::from_proto(&w.state),
            result: w.result,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireRelease {
    released: bool,
    job_id: String,
}

impl From<WireRelease> for KeyRelease {
    fn from(w: WireRelease) -> Self {
        KeyRelease { released: w.released, job_id: w.job_id }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireQueueInfo {
    name: String,
    #[serde(deserialize_with = "de_i64")]
    scheduled: i64,
    #[serde(deserialize_with = "de_i64")]
    available: i64,
    #[serde(deserialize_with = "de_i64")]
    reserved: i64,
    #[serde(deserialize_with = "de_i64")]
    completed: i64,
    #[serde(deserialize_with = "de_i64")]
    dead: i64,
    #[serde(deserialize_with = "de_i64")]
    cancelled: i64,
    #[serde(deserialize_with = "de_i64")]
    dedup_records: i64,
    paused: bool,
}

impl From<WireQueueInfo> for QueueInfo {
    fn from(w: WireQueueInfo) -> Self {
        QueueInfo {
            name: w.name,
            scheduled: w.scheduled,
            available: w.available,
            reserved: w.reserved,
            completed: w.completed,
            dead: w.dead,
            cancelled: w.cancelled,
            dedup_records: w.dedup_records,
            paused: w.paused,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireListQueues {
    pub queues: Vec<WireQueueInfo>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireListJobs {
    pub jobs: Vec<WireJob>,
    pub next_page_token: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireClaim {
    #[serde(deserialize_with = "de_enum")]
    outcome: String,
    token: String,
    #[serde(deserialize_with = "de_b64")]
    result: Vec<u8>,
    #[serde(deserialize_with = "de_time")]
    lease_expires_at: Option<SystemTime>,
}

impl From<WireClaim> for EffectClaim {
    fn from(w: WireClaim) -> Self {
        EffectClaim { state: EffectState::from_proto(&w.outcome), token: w.token, result: w.result, lease_expires_at: w.lease_expires_at }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireLeaseExpiry {
    #[serde(deserialize_with = "de_time")]
    pub lease_expires_at: Option<SystemTime>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct WireEffectRecord {
    found: bool,
    #[serde(deserialize_with = "de_enum")]
    state: String,
    #[serde(deserialize_with = "de_b64")]
    result: Vec<u8>,
    #[serde(deserialize_with = "de_time")]
    completed_at: Option<SystemTime>,
    #[serde(deserialize_with = "de_time")]
    expires_at: Option<SystemTime>,
}

impl From<WireEffectRecord> for EffectRecord {
    fn from(w: WireEffectRecord) -> Self {
        EffectRecord {
            found: w.found,
            state: if w.found { Some(EffectState::from_proto(&w.state)) } else { None },
            result: w.result,
            completed_at: w.completed_at,
            expires_at: w.expires_at,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireHealth {
    #[serde(deserialize_with = "de_enum")]
    pub status: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireIgnored {}

/// The Connect error body.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireError {
    pub code: String,
    pub message: String,
    pub details: Vec<WireErrorDetail>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireErrorDetail {
    #[serde(rename = "type")]
    pub type_: String,
    pub value: String,
    pub debug: Option<serde_json::Value>,
}

// ---- helpers ----

fn is_zero(v: &i32) -> bool {
    *v == 0
}

fn ser_b64<S: Serializer>(v: &&[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&base64::encode(v))
}

fn ser_i64<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string())
}

fn ser_opt_i64<S: Serializer>(v: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(&v.to_string()),
        None => s.serialize_none(),
    }
}

/// Decodes base64 as protojson writes it (standard, padded) or as other
/// writers may (unpadded, URL-safe).
pub(crate) fn decode_b64(s: &str) -> Option<Vec<u8>> {
    let t = s.trim_end_matches('=');
    base64::decode_config(t, base64::STANDARD_NO_PAD).or_else(|_| base64::decode_config(t, base64::URL_SAFE_NO_PAD)).ok()
}

fn de_b64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    match s {
        None => Ok(Vec::new()),
        Some(s) => decode_b64(&s).ok_or_else(|| de::Error::custom("invalid base64 in a bytes field")),
    }
}

fn de_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SystemTime>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    match s {
        None => Ok(None),
        Some(s) => timefmt::parse(&s).map(Some).ok_or_else(|| de::Error::custom(format!("invalid timestamp {s:?}"))),
    }
}

fn de_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None => Ok(0),
        Some(serde_json::Value::Number(n)) => n.as_i64().ok_or_else(|| de::Error::custom("int64 out of range")),
        Some(serde_json::Value::String(s)) => s.parse().map_err(|_| de::Error::custom(format!("invalid int64 {s:?}"))),
        Some(_) => Err(de::Error::custom("invalid int64")),
    }
}

/// An enum by name, or by number (both are valid proto3 JSON).
fn de_enum<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None => Ok(String::new()),
        Some(serde_json::Value::String(s)) => Ok(s),
        Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
        Some(_) => Err(de::Error::custom("invalid enum value")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enqueue_request_json() {
        let r = EnqueueRequest::new("emails", "receipt").unwrap().with_idempotency_key("");
        assert_eq!(String::from_utf8(encode_enqueue(&r)).unwrap(), r#"{"queue":"emails","jobType":"receipt","idempotencyKey":""}"#);
        let r = EnqueueRequest::new("emails", "receipt").unwrap();
        assert_eq!(String::from_utf8(encode_enqueue(&r)).unwrap(), r#"{"queue":"emails","jobType":"receipt"}"#);
        let r = EnqueueRequest::new("q", "t")
            .unwrap()
            .with_payload(b"hi".to_vec())
            .with_priority(3)
            .with_max_attempts(2)
            .with_header("a", "b")
            .with_run_at(timefmt::parse("2030-01-02T03:04:05Z").unwrap());
        assert_eq!(
            String::from_utf8(encode_enqueue(&r)).unwrap(),
            r#"{"queue":"q","jobType":"t","payload":"aGk=","priority":3,"runAt":"2030-01-02T03:04:05Z","maxAttempts":2,"headers":{"a":"b"}}"#
        );
    }

    #[test]
    fn batch_response_json() {
        let body = r#"{"results":[{"ack":{"jobId":"j1", "deduplicated":false, "payloadMismatch":false, "dedupExpiresAt":"2026-12-01T15:26:13.414438Z"}}, {"error":{"code":"invalid_argument", "reason":"IDEMPOTENCY_KEY_EMPTY", "message":"m"}}]}"#;
        let r: WireBatchResponse = serde_json::from_str(body).unwrap();
        assert_eq!(r.results.len(), 2);
        assert_eq!(r.results[0].ack.as_ref().unwrap().job_id, "j1");
        assert_eq!(r.results[1].error.as_ref().unwrap().reason, "IDEMPOTENCY_KEY_EMPTY");
        let l: WireLookup =
            serde_json::from_str(r#"{"found":false, "jobId":"", "hits":"0", "state":"JOB_STATE_UNSPECIFIED", "result":""}"#).unwrap();
        assert!(!l.found);
    }
}
