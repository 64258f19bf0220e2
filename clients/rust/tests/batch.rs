//! Acceptance 3: batches, atomic and not, and the natural batching of
//! concurrent enqueues.

mod common;

use std::collections::HashSet;

use common::{unique, Server};
use sepp_rs::client::SeppClient;
use sepp_rs::{EnqueueRequest, Error, JobState, ListJobsRequest};

fn job(queue: &str, key: &str) -> EnqueueRequest {
    EnqueueRequest::new(queue, "receipt").unwrap().with_idempotency_key(key)
}

#[tokio::test]
async fn non_atomic_batch_gives_per_item_results_in_order() {
    let server = Server::start_with_config(
        r#"
[[queues]]
name = "mail"
job_types = ["receipt"]
"#,
    );
    let client = SeppClient::connect(server.url()).await.unwrap();
    let q = unique("batch");
    let first = client.enqueue(job(&q, "order-1")).await.unwrap();
    let results = client
        .enqueue_batch(
            vec![
                job(&q, "order-1"),                                                        // recorded before
                job(&q, "order-2"),                                                        // new
                job(&q, "order-2"),                                                        // same key again
                job(&q, ""),                                                               // empty key: local error
                EnqueueRequest::new("mail", "sms").unwrap().with_idempotency_key("sms-1"), // server error
                job(&q, &"k".repeat(257)),                                                 // too long: local error
                EnqueueRequest::new(&q, "receipt").unwrap(),                               // unkeyed
            ],
            false,
        )
        .await
        .unwrap();
    assert_eq!(results.len(), 7);
    let ack = |i: usize| results[i].as_ref().unwrap_or_else(|e| panic!("item {i}: {e}"));
    assert!(ack(0).deduplicated && ack(0).job_id == first.job_id);
    assert!(!ack(1).deduplicated);
    assert!(ack(2).deduplicated && ack(2).job_id == ack(1).job_id);
    assert!(matches!(results[3], Err(Error::IdempotencyKeyEmpty(_))), "{:?}", results[3]);
    assert!(matches!(results[4], Err(Error::UnknownJobType(_))), "{:?}", results[4]);
    assert!(matches!(results[5], Err(Error::IdempotencyKeyTooLong(_))), "{:?}", results[5]);
    assert!(!ack(6).deduplicated && ack(6).dedup_expires_at.is_none());
    assert!(ack(1).dedup_expires_at.is_some() && ack(0).original_enqueued_at.is_some());

    // Every job is what the acks say.
    let j = client.get_job(&ack(1).job_id).await.unwrap();
    assert_eq!((j.queue.as_str(), j.idempotency_key.as_deref(), j.state), (q.as_str(), Some("order-2"), JobState::Available));
}

#[tokio::test]
async fn atomic_batch_with_one_bad_item_writes_nothing() {
    let server = Server::start_with_config(
        r#"
[[queues]]
name = "mail"
job_types = ["receipt"]
"#,
    );
    let client = SeppClient::connect(server.url()).await.unwrap();

    // Found by the server (a job type the queue does not accept).
    let e = client
        .enqueue_batch(
            vec![
                EnqueueRequest::new("mail", "receipt").unwrap().with_idempotency_key("order-11"),
                EnqueueRequest::new("mail", "receipt").unwrap().with_idempotency_key("order-12"),
                EnqueueRequest::new("mail", "sms").unwrap().with_idempotency_key("order-13"),
            ],
            true,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::UnknownJobType(_)), "{e}");
    assert_eq!(e.index(), Some(2));
    assert!(e.message().starts_with("jobs[2]: "), "{e}");
    for key in ["order-11", "order-12", "order-13"] {
        assert!(!client.lookup_idempotency_key("mail", key).await.unwrap().found, "{key} was written");
    }

    // Found by the client before sending (an empty key).
    let e = client
        .enqueue_batch(
            vec![
                EnqueueRequest::new("mail", "receipt").unwrap().with_idempotency_key("order-11"),
                EnqueueRequest::new("mail", "receipt").unwrap().with_idempotency_key(""),
            ],
            true,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::IdempotencyKeyEmpty(_)), "{e}");
    assert_eq!(e.index(), Some(1));
    assert!(!client.lookup_idempotency_key("mail", "order-11").await.unwrap().found);

    // Found by the server with the local check off.
    let unchecked = SeppClient::builder(server.url()).max_idempotency_key_bytes(None).build().unwrap();
    let e = unchecked
        .enqueue_batch(
            vec![
                EnqueueRequest::new("mail", "receipt").unwrap().with_idempotency_key("order-11"),
                EnqueueRequest::new("mail", "receipt").unwrap().with_idempotency_key("k".repeat(300)),
            ],
            true,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::IdempotencyKeyTooLong(_)), "{e}");
    assert_eq!(e.index(), Some(1));
    assert!(!client.lookup_idempotency_key("mail", "order-11").await.unwrap().found);

    // A valid atomic batch is written whole; a hit is not a failure.
    let results = client
        .enqueue_batch(
            vec![
                EnqueueRequest::new("mail", "receipt").unwrap().with_idempotency_key("order-11"),
                EnqueueRequest::new("mail", "receipt").unwrap().with_idempotency_key("order-11"),
            ],
            true,
        )
        .await
        .unwrap();
    let (a, b) = (results[0].as_ref().unwrap(), results[1].as_ref().unwrap());
    assert!(!a.deduplicated && b.deduplicated && a.job_id == b.job_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_enqueues_are_coalesced_and_each_gets_its_own_answer() {
    let server = Server::start_with_config("[server]\nmax_batch_size = 7\n");
    // max_batch_size 7 on the server, 1000 in the client: the client learns
    // the limit from BATCH_TOO_LARGE and splits, and no caller sees it.
    let client = SeppClient::connect(server.url()).await.unwrap();
    let q = unique("coalesce");
    let mut tasks = Vec::new();
    for i in 0..300 {
        let client = client.clone();
        let q = q.clone();
        tasks.push(tokio::spawn(async move {
            let mut r = EnqueueRequest::new(&q, "receipt").unwrap();
            if i % 3 != 0 {
                r = r.with_idempotency_key(format!("key-{}", i % 100));
            }
            if i % 50 == 7 {
                r = r.with_idempotency_key(""); // this caller alone gets an error
            }
            (i, client.enqueue(r).await)
        }));
    }
    let mut ids_by_key = std::collections::HashMap::new();
    let mut errors = 0;
    for t in tasks {
        let (i, r) = t.await.unwrap();
        match r {
            Err(Error::IdempotencyKeyEmpty(_)) if i % 50 == 7 => errors += 1,
            Err(e) => panic!("enqueue {i}: {e}"),
            Ok(ack) if i % 3 != 0 => {
                let id = ids_by_key.entry(i % 100).or_insert_with(|| ack.job_id.clone());
                assert_eq!(*id, ack.job_id, "key-{} got two jobs", i % 100);
            }
            Ok(_) => {}
        }
    }
    assert_eq!(errors, 6);
    // 100 unkeyed jobs and 100 distinct keys (keyed callers: i % 3 != 0,
    // covering every key-N), minus nothing: count the jobs.
    let mut seen = HashSet::new();
    let mut page = ListJobsRequest { queue: q.clone(), page_size: 1000, ..Default::default() };
    loop {
        let p = client.list_jobs(&page).await.unwrap();
        for j in p.jobs {
            assert!(seen.insert(j.job_id));
        }
        if p.next_page_token.is_empty() {
            break;
        }
        page.page_token = p.next_page_token;
    }
    let unkeyed = (0..300).filter(|i| i % 3 == 0 && i % 50 != 7).count();
    let keys: HashSet<_> = (0..300).filter(|i| i % 3 != 0 && i % 50 != 7).map(|i| i % 100).collect();
    assert_eq!(seen.len(), unkeyed + keys.len());
}
