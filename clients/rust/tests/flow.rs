//! Flow control against a real server: `when_running = "run_again"` (a
//! trigger while the key's job runs makes one follow-up, named in the ack and
//! held until the running job ends) and `[[queues.rules]]` rules with a
//! limit, refusing (`action = "reject"`) or scheduling the job for when the
//! window has room (`action = "delay"`).

mod common;

use std::time::{Duration, SystemTime};

use common::{unique, Server};
use sepp_rs::client::SeppClient;
use sepp_rs::{EnqueueRequest, Error, JobHold, JobState, ReserveRequest};

const CONFIG: &str = r#"
[[queues]]
name = "sync"
when_running = "run_again"

[[queues]]
name = "charges"
[[queues.rules]]
name = "account"
key_fields = ["/account"]
window_ms = 60000
limit = 2

[[queues]]
name = "mails"
[[queues.rules]]
name = "account"
key_fields = ["/account"]
window_ms = 60000
limit = 2
action = "delay"
"#;

const WINDOW: Duration = Duration::from_millis(60000);

async fn start() -> (Server, SeppClient) {
    let server = Server::start_with_config(CONFIG);
    let client = SeppClient::connect(server.url()).await.unwrap();
    (server, client)
}

fn account_payload() -> Vec<u8> {
    format!(r#"{{"account":"{}"}}"#, unique("acc")).into_bytes()
}

fn reserve_sync(wait: Duration) -> ReserveRequest {
    ReserveRequest { queues: vec!["sync".into()], max_jobs: 10, wait, ..Default::default() }
}

#[tokio::test]
async fn run_again_makes_one_follow_up_that_waits_for_the_running_job() {
    let (_server, client) = start().await;
    let req = EnqueueRequest::new("sync", "rebuild").unwrap().with_idempotency_key(unique("cache"));
    let first = client.enqueue(req.clone()).await.unwrap();
    assert!(!first.deduplicated && first.follows_job_id.is_none(), "{first:?}");
    let running = client.reserve(&reserve_sync(Duration::ZERO)).await.unwrap();
    assert_eq!(running.iter().map(|r| r.job.job_id.as_str()).collect::<Vec<_>>(), [first.job_id.as_str()]);

    // A trigger while the job runs: a new job that follows it, not a hit.
    let follow = client.enqueue(req.clone()).await.unwrap();
    assert!(!follow.deduplicated, "{follow:?}");
    assert_ne!(follow.job_id, first.job_id);
    assert_eq!(follow.follows_job_id.as_deref(), Some(first.job_id.as_str()));
    assert_eq!(follow.delayed_until, None);

    // Triggers while the follow-up waits are ordinary hits on it.
    let again = client.enqueue(req.clone()).await.unwrap();
    assert!(again.deduplicated, "{again:?}");
    assert_eq!((again.job_id.as_str(), again.follows_job_id.as_deref()), (follow.job_id.as_str(), None));

    let waiting = client.get_job(&follow.job_id).await.unwrap();
    assert_eq!(waiting.state, JobState::Scheduled);
    assert_eq!(waiting.held_by, Some(JobHold::FollowUp));
    assert_eq!(waiting.held_by.map(JobHold::as_str), Some("follow_up"));
    assert_eq!(waiting.follows_job_id.as_deref(), Some(first.job_id.as_str()));
    assert_eq!(waiting.held_until, None);
    let original = client.get_job(&first.job_id).await.unwrap();
    assert_eq!((original.held_by, original.follows_job_id), (None, None));

    let queues = client.list_queues().await.unwrap();
    let sync = queues.iter().find(|q| q.name == "sync").expect("sync is listed");
    assert_eq!((sync.held_follow_up, sync.held_concurrency, sync.held_rate), (1, 0, 0), "{sync:?}");

    // Nothing to reserve while the original runs; once it completes, the
    // follow-up is handed out.
    assert!(client.reserve(&reserve_sync(Duration::ZERO)).await.unwrap().is_empty());
    client.complete(&running[0].job.job_id, &running[0].lease_token, b"").await.unwrap();
    let next = client.reserve(&reserve_sync(Duration::from_secs(10))).await.unwrap();
    assert_eq!(next.iter().map(|r| r.job.job_id.as_str()).collect::<Vec<_>>(), [follow.job_id.as_str()]);
    assert_eq!((next[0].job.held_by, next[0].job.follows_job_id.as_deref()), (None, None));
}

#[tokio::test]
async fn a_rule_limit_refuses_with_the_limit_and_no_job() {
    let (_server, client) = start().await;
    let payload = account_payload();
    let req = || EnqueueRequest::new("charges", "charge").unwrap().with_payload(payload.clone());
    for _ in 0..2 {
        client.enqueue(req()).await.unwrap();
    }
    let e = client.enqueue(req()).await.unwrap_err();
    assert!(matches!(e, Error::DedupRuleViolated(_)), "{e:?}");
    let md = &e.detail().expect("a server error").metadata;
    assert_eq!((md.get("rule").map(String::as_str), md.get("limit").map(String::as_str)), (Some("account"), Some("2")), "{md:?}");
    assert!(md.get("frees_at").map_or(false, |f| !f.is_empty()), "{md:?}");
    // Two jobs hold the window, so none is named.
    assert_eq!(md.get("job_id"), None, "{md:?}");
}

#[tokio::test]
async fn a_delaying_rule_schedules_the_job_for_when_the_window_has_room() {
    let (_server, client) = start().await;
    let payload = account_payload();
    let before = SystemTime::now();
    let mut acks = Vec::new();
    for _ in 0..3 {
        acks.push(client.enqueue(EnqueueRequest::new("mails", "mail").unwrap().with_payload(payload.clone())).await.unwrap());
    }
    let after = SystemTime::now();
    assert_eq!((acks[0].delayed_until, acks[1].delayed_until), (None, None));
    let until = acks[2].delayed_until.expect("the third is delayed");
    assert!(!acks[2].deduplicated && acks[2].follows_job_id.is_none(), "{:?}", acks[2]);
    // The window of the first job ends a minute after it was enqueued.
    let first = client.get_job(&acks[0].job_id).await.unwrap();
    assert_eq!(Some(until), first.created_at.map(|t| t + WINDOW));
    let slack = Duration::from_secs(1);
    assert!(until >= before + WINDOW - slack && until <= after + WINDOW + slack, "{until:?}");
    let delayed = client.get_job(&acks[2].job_id).await.unwrap();
    assert_eq!((delayed.state, delayed.run_at), (JobState::Scheduled, Some(until)));
}
