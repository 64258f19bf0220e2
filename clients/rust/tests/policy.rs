//! The queue dedup policies against a real server: `on_duplicate` = replace,
//! debounce and reject, `require_key`, `key_fields` (the key the server
//! derives, in the ack and by payload), `[[queues.rules]]`, and reject in
//! batches, atomic and not.

mod common;

use std::time::{Duration, SystemTime};

use common::{unique, Server};
use sepp_rs::client::SeppClient;
use sepp_rs::{EnqueueRequest, Error, JobState, ReserveRequest};

const CONFIG: &str = r#"
[[queues]]
name = "replace-q"
on_duplicate = "replace"

[[queues]]
name = "debounce-q"
on_duplicate = "debounce"
debounce_ms = 60000
debounce_max_wait_ms = 120000

[[queues]]
name = "capped-q"
on_duplicate = "debounce"
debounce_ms = 60000
debounce_max_wait_ms = 1000

[[queues]]
name = "reject-q"
on_duplicate = "reject"

[[queues]]
name = "need-key"
require_key = true

[[queues]]
name = "fields-q"
key_fields = ["/account", "/amount"]

[[queues]]
name = "rule-q"

[[queues.rules]]
name = "same-amount"
key_fields = ["/account", "/amount"]
window_ms = 60000
"#;

const DEBOUNCE: Duration = Duration::from_millis(60000);

async fn start() -> (Server, SeppClient) {
    let server = Server::start_with_config(CONFIG);
    let client = SeppClient::connect(server.url()).await.unwrap();
    (server, client)
}

fn req(queue: &str, job_type: &str, payload: &[u8]) -> EnqueueRequest {
    EnqueueRequest::new(queue, job_type).unwrap().with_payload(payload.to_vec())
}

fn meta<'a>(e: &'a Error, name: &str) -> Option<&'a str> {
    e.detail().and_then(|d| d.metadata.get(name)).map(String::as_str)
}

#[tokio::test]
async fn replace_takes_the_new_payload_until_reserved() {
    let (_server, client) = start().await;
    let k = unique("k");
    let first = client.enqueue(req("replace-q", "sync", b"A").with_idempotency_key(&k)).await.unwrap();
    assert!(!first.deduplicated && !first.replaced, "{first:?}");

    let second = client.enqueue(req("replace-q", "sync", b"B").with_idempotency_key(&k).with_priority(3)).await.unwrap();
    assert!(second.deduplicated && second.replaced, "{second:?}");
    assert_eq!(second.job_id, first.job_id);
    assert!(second.original_enqueued_at.is_some());
    let job = client.get_job(&first.job_id).await.unwrap();
    assert_eq!((job.payload.as_slice(), job.priority, job.state), (&b"B"[..], 3, JobState::Available));
    // The record took B's fingerprint: B again is no mismatch.
    let same = client.enqueue(req("replace-q", "sync", b"B").with_idempotency_key(&k).with_priority(3)).await.unwrap();
    assert!(same.deduplicated && same.job_id == first.job_id && !same.payload_mismatch, "{same:?}");

    let reserved = client
        .reserve(&ReserveRequest { queues: vec!["replace-q".into()], wait: Duration::from_secs(5), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(reserved.iter().map(|r| r.job.job_id.as_str()).collect::<Vec<_>>(), vec![first.job_id.as_str()]);
    assert_eq!(reserved[0].job.payload, b"B");

    let late = client.enqueue(req("replace-q", "sync", b"C").with_idempotency_key(&k)).await.unwrap();
    assert!(late.deduplicated && !late.replaced && late.payload_mismatch, "{late:?}");
    assert_eq!(late.job_id, first.job_id);
    let job = client.get_job(&first.job_id).await.unwrap();
    assert_eq!((job.payload.as_slice(), job.state), (&b"B"[..], JobState::Reserved));
    assert!(!client.complete(&first.job_id, &reserved[0].lease_token, b"").await.unwrap());
}

#[tokio::test]
async fn debounce_replaces_and_pushes_run_at_back() {
    let (_server, client) = start().await;
    let k = unique("k");
    let first = client.enqueue(req("debounce-q", "digest", b"A").with_idempotency_key(&k)).await.unwrap();
    assert!(!first.deduplicated && !first.replaced, "{first:?}");
    // A new job on a debounce queue waits debounce_ms too.
    assert_eq!(client.get_job(&first.job_id).await.unwrap().state, JobState::Scheduled);

    let before = SystemTime::now();
    let second = client.enqueue(req("debounce-q", "digest", b"B").with_idempotency_key(&k)).await.unwrap();
    let after = SystemTime::now();
    assert!(second.deduplicated && second.replaced, "{second:?}");
    assert_eq!(second.job_id, first.job_id);

    let job = client.get_job(&first.job_id).await.unwrap();
    assert_eq!((job.payload.as_slice(), job.state), (&b"B"[..], JobState::Scheduled));
    let run_at = job.run_at.expect("run_at");
    let created = job.created_at.expect("created_at");
    // The server's clock is this one's; times are kept to the microsecond.
    let slack = Duration::from_millis(5);
    assert!(run_at > after, "run_at {run_at:?} is not after {after:?}");
    assert!(
        before + DEBOUNCE - slack <= run_at && run_at <= after + DEBOUNCE + slack,
        "run_at {run_at:?} is not now + debounce_ms ({before:?} .. {after:?})"
    );
    assert!(run_at <= created + Duration::from_millis(120000));
}

#[tokio::test]
async fn debounce_never_past_max_wait() {
    let (_server, client) = start().await;
    let k = unique("k");
    let first = client.enqueue(req("capped-q", "digest", b"A").with_idempotency_key(&k)).await.unwrap();
    let second = client.enqueue(req("capped-q", "digest", b"B").with_idempotency_key(&k)).await.unwrap();
    assert!(second.deduplicated && second.replaced && second.job_id == first.job_id, "{second:?}");
    let job = client.get_job(&first.job_id).await.unwrap();
    assert_eq!(job.payload, b"B");
    // now + debounce_ms (60 s) is past first enqueue + debounce_max_wait_ms (1 s): capped there.
    let cap = job.created_at.unwrap() + Duration::from_millis(1000);
    let run_at = job.run_at.unwrap();
    let diff = run_at.duration_since(cap).unwrap_or_else(|e| e.duration());
    assert!(diff < Duration::from_millis(1), "run_at {run_at:?}, cap {cap:?}");
}

#[tokio::test]
async fn replace_within_one_batch() {
    let (_server, client) = start().await;
    let k = unique("k");
    let results = client
        .enqueue_batch(
            vec![req("replace-q", "sync", b"A").with_idempotency_key(&k), req("replace-q", "sync", b"B").with_idempotency_key(&k)],
            false,
        )
        .await
        .unwrap();
    let (a, b) = (results[0].as_ref().unwrap(), results[1].as_ref().unwrap());
    assert!(!a.deduplicated && !a.replaced, "{a:?}");
    assert!(b.deduplicated && b.replaced && b.job_id == a.job_id, "{b:?}");
    assert_eq!(client.get_job(&a.job_id).await.unwrap().payload, b"B");
}

#[tokio::test]
async fn reject_names_the_original() {
    let (_server, client) = start().await;
    let k = unique("k");
    let first = client.enqueue(req("reject-q", "charge", b"A").with_idempotency_key(&k)).await.unwrap();
    assert!(!first.deduplicated);
    let e = client.enqueue(req("reject-q", "charge", b"A").with_idempotency_key(&k)).await.unwrap_err();
    assert!(matches!(e, Error::DuplicateJob(_)), "{e:?}");
    assert_eq!((e.reason(), e.code()), ("DUPLICATE_JOB", "already_exists"));
    assert_eq!(meta(&e, "job_id"), Some(first.job_id.as_str()), "{e:?}");
    assert!(e.message().contains(&first.job_id) && e.message().contains(r#"on_duplicate = "reject""#), "{e}");
    // Nothing written, no hit counted.
    let look = client.lookup_idempotency_key("reject-q", &k).await.unwrap();
    assert!(look.found && look.job_id == first.job_id && look.hits == 0, "{look:?}");
}

#[tokio::test]
async fn require_key() {
    let (_server, client) = start().await;
    let e = client.enqueue(req("need-key", "charge", b"{}")).await.unwrap_err();
    assert!(matches!(e, Error::IdempotencyKeyRequired(_)), "{e:?}");
    assert_eq!((e.reason(), e.code()), ("IDEMPOTENCY_KEY_REQUIRED", "invalid_argument"));
    assert!(e.message().contains(r#""need-key""#) && e.message().contains("require_key = true"), "{e}");
    let ack = client.enqueue(req("need-key", "charge", b"{}").with_idempotency_key(unique("k"))).await.unwrap();
    assert!(!ack.deduplicated);
}

#[tokio::test]
async fn key_fields_the_server_says_the_key() {
    let (_server, client) = start().await;
    let payload = br#"{"account":"acc-1","amount":100,"note":"first"}"#;
    let ack = client.enqueue(req("fields-q", "move", payload)).await.unwrap();
    assert!(!ack.deduplicated && ack.dedup_expires_at.is_some(), "{ack:?}");

    // The ack says the key the server derived: the canonical JSON of the
    // fields' values.
    let k = ack.idempotency_key.clone().expect("the ack of a job on a key_fields queue has its derived key");
    assert_eq!(k, r#"["acc-1",100]"#);
    assert_eq!(client.get_job(&ack.job_id).await.unwrap().idempotency_key.as_deref(), Some(k.as_str()));
    let look = client.lookup_idempotency_key("fields-q", &k).await.unwrap();
    assert!(look.found && look.job_id == ack.job_id && look.idempotency_key == k, "{look:?}");

    // Other members, another order, 1e2 for 100: the same key, a hit, and
    // found by that payload too.
    let other = br#"{"amount":1e2,"account":"acc-1"}"#;
    let again = client.enqueue(req("fields-q", "move", other)).await.unwrap();
    assert!(again.deduplicated && again.job_id == ack.job_id && again.payload_mismatch, "{again:?}");
    assert_eq!(again.idempotency_key.as_deref(), Some(k.as_str()));
    let look = client.lookup_idempotency_key_by_payload("fields-q", other).await.unwrap();
    assert!(look.found && look.job_id == ack.job_id && look.hits == 1, "{look:?}");
    assert_eq!(look.idempotency_key, k);
    let other_amount = client.lookup_idempotency_key_by_payload("fields-q", br#"{"account":"acc-1","amount":101}"#).await.unwrap();
    assert!(!other_amount.found, "{other_amount:?}");
    assert_eq!(other_amount.idempotency_key, r#"["acc-1",101]"#);

    // Not a JSON object: INVALID_FIELD on the payload itself (pointer ""),
    // from an enqueue and from a lookup by payload alike.
    let e = client.enqueue(req("fields-q", "move", b"[1,2]")).await.unwrap_err();
    assert!(matches!(e, Error::InvalidField(_)), "{e:?}");
    assert_eq!((e.reason(), e.code()), ("INVALID_FIELD", "invalid_argument"));
    assert_eq!((meta(&e, "pointer"), meta(&e, "field")), (Some(""), Some("payload")), "{e:?}");
    assert!(e.message().starts_with("payload: is an array, not a JSON object"), "{e}");
    let by_payload = client.lookup_idempotency_key_by_payload("fields-q", b"[1,2]").await.unwrap_err();
    assert!(matches!(by_payload, Error::InvalidField(_)), "{by_payload:?}");
    assert_eq!(meta(&by_payload, "pointer"), Some(""), "{by_payload:?}");

    // A missing field: the message and the metadata name its pointer.
    let e = client.enqueue(req("fields-q", "move", br#"{"account":"acc-1"}"#)).await.unwrap_err();
    assert!(matches!(e, Error::InvalidField(_)), "{e:?}");
    assert_eq!(meta(&e, "pointer"), Some("/amount"), "{e:?}");
    assert!(e.message().starts_with(r#"field "/amount": not in the payload"#), "{e}");
    let by_payload = client.release_idempotency_key_by_payload("fields-q", br#"{"account":"acc-1"}"#).await.unwrap_err();
    assert!(matches!(by_payload, Error::InvalidField(_)), "{by_payload:?}");
    assert_eq!(meta(&by_payload, "pointer"), Some("/amount"), "{by_payload:?}");

    // A queue without key_fields has no key to derive: it refuses a payload.
    let e = client.lookup_idempotency_key_by_payload("reject-q", payload).await.unwrap_err();
    assert!(matches!(e, Error::InvalidField(_)), "{e:?}");
    assert!(e.message().contains("no key_fields"), "{e}");
    // An empty payload derives nothing; refused before sending.
    assert!(matches!(client.lookup_idempotency_key_by_payload("fields-q", b"").await, Err(Error::InvalidField(_))));

    // Released by payload: the record is gone, and the next enqueue of the
    // same fields is a new job.
    let released = client.release_idempotency_key_by_payload("fields-q", other).await.unwrap();
    assert!(released.released && released.job_id == ack.job_id && released.idempotency_key == k, "{released:?}");
    assert!(!client.lookup_idempotency_key("fields-q", &k).await.unwrap().found);
    let fresh = client.enqueue(req("fields-q", "move", payload)).await.unwrap();
    assert!(!fresh.deduplicated && fresh.job_id != ack.job_id, "{fresh:?}");
}

#[tokio::test]
async fn the_ack_says_the_key_given_and_none_without_one() {
    let (_server, client) = start().await;
    let k = unique("k");
    let keyed = client.enqueue(req("replace-q", "sync", b"A").with_idempotency_key(&k)).await.unwrap();
    assert_eq!(keyed.idempotency_key.as_deref(), Some(k.as_str()), "{keyed:?}");
    let hit = client.enqueue(req("replace-q", "sync", b"A").with_idempotency_key(&k)).await.unwrap();
    assert!(hit.deduplicated && hit.idempotency_key.as_deref() == Some(k.as_str()), "{hit:?}");
    let unkeyed = client.enqueue(req("replace-q", "sync", b"A")).await.unwrap();
    assert_eq!(unkeyed.idempotency_key, None, "{unkeyed:?}");
    // In a batch too, each item's ack its own.
    let results = client
        .enqueue_batch(vec![req("replace-q", "sync", b"B").with_idempotency_key(&k), req("replace-q", "sync", b"C")], false)
        .await
        .unwrap();
    assert_eq!(results[0].as_ref().unwrap().idempotency_key.as_deref(), Some(k.as_str()));
    assert_eq!(results[1].as_ref().unwrap().idempotency_key, None);
}

#[tokio::test]
async fn rule_refuses_the_same_fields_under_another_key() {
    let (_server, client) = start().await;
    let payload = br#"{"account":"acc-1","amount":100}"#;
    let k1 = unique("pay");
    let first = client.enqueue(req("rule-q", "charge", payload).with_idempotency_key(&k1)).await.unwrap();
    assert!(!first.deduplicated);
    // A retry of the first job's own key is a hit, not judged by the rule.
    let retry = client.enqueue(req("rule-q", "charge", payload).with_idempotency_key(&k1)).await.unwrap();
    assert!(retry.deduplicated && retry.job_id == first.job_id, "{retry:?}");

    let e = client.enqueue(req("rule-q", "charge", payload).with_idempotency_key(unique("pay"))).await.unwrap_err();
    assert!(matches!(e, Error::DedupRuleViolated(_)), "{e:?}");
    assert_eq!((e.reason(), e.code()), ("DEDUP_RULE_VIOLATED", "failed_precondition"));
    assert_eq!(meta(&e, "rule"), Some("same-amount"), "{e:?}");
    assert_eq!(meta(&e, "job_id"), Some(first.job_id.as_str()), "{e:?}");
    assert!(meta(&e, "frees_at").map_or(false, |f| !f.is_empty()), "{e:?}");
    assert!(e.message().contains(r#"rule "same-amount""#) && e.message().contains(&first.job_id), "{e}");

    // Another amount is another request.
    let other =
        client.enqueue(req("rule-q", "charge", br#"{"account":"acc-1","amount":101}"#).with_idempotency_key(unique("pay"))).await.unwrap();
    assert!(!other.deduplicated && other.job_id != first.job_id);
}

#[tokio::test]
async fn reject_in_batches() {
    let (_server, client) = start().await;
    let keyed = |k: &str| EnqueueRequest::new("reject-q", "charge").unwrap().with_idempotency_key(k);
    let (k0, k1) = (unique("b"), unique("b"));
    let results = client.enqueue_batch(vec![keyed(&k0), keyed(&k0), keyed(&k1)], false).await.unwrap();
    assert_eq!(results.len(), 3);
    let ack0 = results[0].as_ref().unwrap();
    let ack2 = results[2].as_ref().unwrap();
    assert!(!ack0.deduplicated && !ack2.deduplicated);
    let e = results[1].as_ref().unwrap_err();
    assert!(matches!(e, Error::DuplicateJob(_)), "{e:?}");
    assert_eq!((e.reason(), e.code()), ("DUPLICATE_JOB", "already_exists"));
    assert_eq!(meta(e, "job_id"), Some(ack0.job_id.as_str()), "{e:?}");

    // Atomic, the duplicate inside the batch: fails at index 1, writes nothing.
    let (k2, k3) = (unique("b"), unique("b"));
    let e = client.enqueue_batch(vec![keyed(&k2), keyed(&k2), keyed(&k3)], true).await.unwrap_err();
    assert!(matches!(e, Error::DuplicateJob(_)), "{e:?}");
    assert_eq!(e.index(), Some(1), "{e:?}");
    assert!(e.message().starts_with("jobs[1]: "), "{e}");
    // The original is item 0, never written: named by its index, not an id.
    assert_eq!(meta(&e, "original_index"), Some("0"), "{e:?}");
    assert_eq!(meta(&e, "job_id"), None, "{e:?}");
    for k in [&k2, &k3] {
        assert!(!client.lookup_idempotency_key("reject-q", k).await.unwrap().found, "{k} was written");
    }

    // Atomic, the duplicate of a job written before: its index, the original.
    let e = client.enqueue_batch(vec![keyed(&k3), keyed(&k1)], true).await.unwrap_err();
    assert!(matches!(e, Error::DuplicateJob(_)), "{e:?}");
    assert_eq!(e.index(), Some(1), "{e:?}");
    assert_eq!(meta(&e, "job_id"), Some(ack2.job_id.as_str()), "{e:?}");
    assert!(!client.lookup_idempotency_key("reject-q", &k3).await.unwrap().found);
}
