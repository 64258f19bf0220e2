//! The raw worker calls: reserve, complete, fail, extend a lease.

mod common;

use std::time::Duration;

use common::{unique, Server};
use sepp_rs::client::SeppClient;
use sepp_rs::{EnqueueRequest, Error, FailRequest, JobState, ReserveRequest};

#[tokio::test]
async fn reserve_complete_fail_and_extend() {
    let server = Server::start();
    let client = SeppClient::connect(server.url()).await.unwrap();
    let q = unique("work");
    let reserve = |lease_ms: u64| ReserveRequest {
        queues: vec![q.clone()],
        worker_id: "rust-test".into(),
        max_jobs: 10,
        lease: Some(Duration::from_millis(lease_ms)),
        wait: Duration::from_secs(10),
    };

    let ack = client.enqueue(EnqueueRequest::new(&q, "t").unwrap().with_idempotency_key("a").with_payload("p")).await.unwrap();
    let got = client.reserve(&reserve(30_000)).await.unwrap();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!((r.job.job_id.as_str(), r.job.payload.as_slice(), r.attempt), (ack.job_id.as_str(), &b"p"[..], 1));
    assert_eq!(r.lease, Duration::from_secs(30));
    assert!(client.extend_lease(&r.job.job_id, &r.lease_token, Duration::from_secs(60)).await.unwrap().is_some());
    assert!(!client.complete(&r.job.job_id, &r.lease_token, b"result").await.unwrap());
    let job = client.get_job(&ack.job_id).await.unwrap();
    assert_eq!((job.state, job.result.as_slice()), (JobState::Completed, &b"result"[..]));
    let lookup = client.lookup_idempotency_key(&q, "a").await.unwrap();
    assert_eq!((lookup.state, lookup.result.as_slice()), (JobState::Completed, &b"result"[..]));
    // The same Complete again (a resend whose first answer was lost) is a
    // repeat that changes nothing; any other token is refused.
    assert!(client.complete(&r.job.job_id, &r.lease_token, b"result").await.unwrap());
    let e = client.complete(&r.job.job_id, "0123456789abcdef0123456789abcdef", b"x").await.unwrap_err();
    assert!(matches!(e, Error::LeaseLost(_)), "{e}");

    // A retryable failure reschedules; a permanent one dead-letters.
    let ack = client.enqueue(EnqueueRequest::new(&q, "t").unwrap()).await.unwrap();
    let r = client.reserve(&reserve(30_000)).await.unwrap().remove(0);
    let out = client
        .fail(&FailRequest {
            job_id: r.job.job_id.clone(),
            lease_token: r.lease_token.clone(),
            error: "smtp timeout".into(),
            retry_after: Some(Duration::from_millis(1)),
            permanent: false,
        })
        .await
        .unwrap();
    assert_eq!(out.state, JobState::Scheduled);
    assert!(out.next_run_at.is_some());
    let r = client.reserve(&reserve(30_000)).await.unwrap().remove(0);
    assert_eq!((r.job.job_id.as_str(), r.attempt, r.job.last_error.as_str()), (ack.job_id.as_str(), 2, "smtp timeout"));
    let out = client
        .fail(&FailRequest {
            job_id: r.job.job_id.clone(),
            lease_token: r.lease_token.clone(),
            error: "bad address".into(),
            permanent: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((out.state, out.already_failed), (JobState::Dead, false));
    assert_eq!(client.get_job(&ack.job_id).await.unwrap().state, JobState::Dead);
    let again = client
        .fail(&FailRequest {
            job_id: r.job.job_id.clone(),
            lease_token: r.lease_token.clone(),
            error: "bad address".into(),
            permanent: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((again.state, again.already_failed), (JobState::Dead, true));
}
