//! Acceptance 2: local key checks that send nothing, and the server's
//! reasons as typed errors.

mod common;

use common::{unique, Server};
use sepp_rs::client::SeppClient;
use sepp_rs::{EnqueueRequest, Error};

fn req(queue: &str) -> EnqueueRequest {
    EnqueueRequest::new(queue, "receipt").unwrap()
}

/// A client whose address has nothing listening: any request it sent would
/// fail with a transport error, so an error with a reason proves that
/// nothing was sent.
fn client_nowhere() -> SeppClient {
    let port = common::free_port();
    SeppClient::builder(format!("http://127.0.0.1:{port}")).enqueue_retries(0).build().unwrap()
}

#[tokio::test]
async fn too_long_and_empty_keys_fail_locally_and_send_nothing() {
    let nowhere = client_nowhere();
    let long = "k".repeat(257);
    let wide = "é".repeat(129); // 129 characters, 258 bytes
    for key in [&long, &wide] {
        let e = nowhere.enqueue(req("emails").with_idempotency_key(key.as_str())).await.unwrap_err();
        assert!(matches!(e, Error::IdempotencyKeyTooLong(_)), "{e}");
        assert_eq!(e.reason(), "IDEMPOTENCY_KEY_TOO_LONG");
        assert!(e.message().contains(&format!("idempotency key is {} bytes; the limit is 256", key.len())), "{e}");
    }
    let e = nowhere.enqueue(req("emails").with_idempotency_key("")).await.unwrap_err();
    assert!(matches!(e, Error::IdempotencyKeyEmpty(_)), "{e}");
    // The same client does send a valid key (and then fails to reach anyone).
    let e = nowhere.enqueue(req("emails").with_idempotency_key("k".repeat(256))).await.unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e}");
    assert!(e.to_string().contains("cannot reach the server at http://127.0.0.1:"), "{e}");

    // Against a real server: the refused keys left nothing behind, and the
    // longest valid keys (256 bytes, 128 two-byte characters) are accepted.
    let server = Server::start();
    let client = SeppClient::connect(server.url()).await.unwrap();
    let q = unique("keys");
    for key in [&long, &wide] {
        let e = client.enqueue(req(&q).with_idempotency_key(key.as_str())).await.unwrap_err();
        assert!(matches!(e, Error::IdempotencyKeyTooLong(_)), "{e}");
    }
    let e = client.enqueue(req(&q).with_idempotency_key("")).await.unwrap_err();
    assert!(matches!(e, Error::IdempotencyKeyEmpty(_)), "{e}");
    let queues = client.list_queues().await.unwrap();
    assert!(queues.iter().all(|qi| qi.name != q), "queue {q} has jobs: {queues:?}");
    for key in ["k".repeat(256), "é".repeat(128)] {
        let ack = client.enqueue(req(&q).with_idempotency_key(key.as_str())).await.unwrap();
        assert!(!ack.deduplicated);
        assert_eq!(client.lookup_idempotency_key(&q, &key).await.unwrap().job_id, ack.job_id);
    }
}

#[tokio::test]
async fn server_checks_the_same_rules() {
    let server = Server::start();
    // With the local length check off, the server answers with the same
    // reason; an empty key is still sent as "" (never as "no key").
    let client = SeppClient::builder(server.url()).max_idempotency_key_bytes(None).connect().await.unwrap();
    let q = unique("server-keys");
    let e = client.enqueue(req(&q).with_idempotency_key("é".repeat(129))).await.unwrap_err();
    assert!(matches!(e, Error::IdempotencyKeyTooLong(_)), "{e}");
    assert_eq!(e.code(), "invalid_argument");
    assert!(e.message().contains("258 bytes"), "{e}");
    assert!(e.to_string().starts_with("sepp: IDEMPOTENCY_KEY_TOO_LONG: idempotency key is 258 bytes"), "{e}");

    // Lookups check keys locally too.
    let e = client.lookup_idempotency_key(&q, "").await.unwrap_err();
    assert!(matches!(e, Error::IdempotencyKeyEmpty(_)), "{e}");
}

#[tokio::test]
async fn unknown_queue_from_a_strict_server() {
    let server = Server::start_with_config(
        r#"
[server]
strict = true

[[queues]]
name = "emails"
"#,
    );
    let client = SeppClient::connect(server.url()).await.unwrap();
    client.enqueue(req("emails")).await.unwrap();
    let e = client.enqueue(req("email").with_idempotency_key("order-1")).await.unwrap_err();
    match &e {
        Error::UnknownQueue(d) => {
            assert_eq!(d.code, "not_found");
            assert_eq!(d.metadata.get("queue").map(String::as_str), Some("email"));
            assert!(d.message.contains("strict = true"), "{e}");
        }
        other => panic!("want UnknownQueue, got {other:?}"),
    }
    // Unkeyed, through the batcher's direct path and with batching off too.
    let plain = SeppClient::builder(server.url()).batching(false).build().unwrap();
    assert!(matches!(plain.enqueue(req("nope")).await, Err(Error::UnknownQueue(_))));
    let e = client.lookup_idempotency_key("nope", "k").await.unwrap_err();
    assert!(matches!(e, Error::UnknownQueue(_)), "{e}");
}

#[tokio::test]
async fn key_conflict_from_a_reject_mismatch_queue() {
    let server = Server::start_with_config(
        r#"
[[queues]]
name = "payments"
key_reuse = "reject_mismatch"
"#,
    );
    let client = SeppClient::connect(server.url()).await.unwrap();
    let charge = |cents: u32| {
        EnqueueRequest::new("payments", "charge")
            .unwrap()
            .with_idempotency_key("charge-order-77")
            .with_payload(format!(r#"{{"cents":{cents}}}"#).into_bytes())
    };
    let first = client.enqueue(charge(1299)).await.unwrap();
    let again = client.enqueue(charge(1299)).await.unwrap();
    assert!(again.deduplicated && again.job_id == first.job_id);
    let e = client.enqueue(charge(999)).await.unwrap_err();
    assert!(matches!(e, Error::IdempotencyKeyConflict(_)), "{e}");
    assert_eq!(e.code(), "already_exists");
    assert!(e.message().contains("reject_mismatch"), "{e}");
    // The conflict wrote nothing: the record still points at the first job.
    let lookup = client.lookup_idempotency_key("payments", "charge-order-77").await.unwrap();
    assert_eq!(lookup.job_id, first.job_id);
    assert_eq!(lookup.hits, 1);
}

#[tokio::test]
async fn job_not_found_and_invalid_field() {
    let server = Server::start();
    let client = SeppClient::connect(server.url()).await.unwrap();
    let e = client.get_job("0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d").await.unwrap_err();
    assert!(matches!(e, Error::JobNotFound(_)), "{e}");
    let e = client.get_job("not-an-id").await.unwrap_err();
    match &e {
        Error::InvalidField(d) => assert_eq!(d.metadata.get("field").map(String::as_str), Some("job_id")),
        other => panic!("want InvalidField, got {other:?}"),
    }
    let e = client.enqueue(req("q").with_max_attempts(-1)).await.unwrap_err();
    assert!(matches!(e, Error::InvalidField(_)), "{e}");
    assert!(e.message().starts_with("max_attempts:"), "{e}");
}

#[tokio::test]
async fn unreachable_server_fails_connect_with_the_address() {
    let port = common::free_port();
    let e = SeppClient::connect(format!("http://127.0.0.1:{port}")).await.unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e}");
    assert!(e.is_retryable());
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
    let e = SeppClient::connect("ftp://example.org").await.unwrap_err();
    assert!(matches!(e, Error::Config(_)), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_can_wait_for_a_server_that_is_not_up_yet() {
    let mut server = Server::start();
    let url = server.url();
    tokio::task::block_in_place(|| server.kill9());
    // The default: one check, failing at once.
    assert!(matches!(SeppClient::connect(&url).await, Err(Error::Transport(_))));
    // Waiting: the server comes back while connect waits. (connect's first
    // check runs on another worker thread while the server process starts,
    // so in practice it fails and connect waits; if it came late, connect
    // would simply succeed at once. Either way it must end connected.)
    let waiting = tokio::spawn(SeppClient::builder(&url).wait_for_server(std::time::Duration::from_secs(120)).connect());
    tokio::task::block_in_place(|| server.restart());
    let client = waiting.await.unwrap().unwrap();
    client.enqueue(req("q")).await.unwrap();
}
