//! Effect keys: one run per key, result replay, release on failure, wait and
//! raise for in-flight holders, lease extension, fail closed.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{unique, Server};
use sepp_rs::client::SeppClient;
use sepp_rs::{ClaimEffectRequest, EffectState, Error};

/// A mailer that counts the mails it sends and returns receipts em_1, em_2, ...
#[derive(Clone, Default)]
struct Mailer(Arc<AtomicUsize>);

impl Mailer {
    fn send(&self) -> Vec<u8> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        format!("em_{n}").into_bytes()
    }
    fn sent(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn runs_once_and_replays_the_result() {
    let server = Server::start();
    let client = SeppClient::connect(server.url()).await.unwrap();
    let scope = unique("mail.invoice");
    let mailer = Mailer::default();
    for round in 0..3 {
        let m = mailer.clone();
        let out = client.effect(&scope, "order-9.invoice").run(|| async move { Ok::<_, Error>(m.send()) }).await.unwrap();
        assert_eq!(out.value, b"em_1");
        assert_eq!(out.replayed, round > 0);
        assert!(!out.unprotected);
    }
    assert_eq!(mailer.sent(), 1);
    let rec = client.get_effect(&scope, "order-9.invoice").await.unwrap();
    assert!(rec.found);
    assert_eq!(rec.state, Some(EffectState::Completed));
    assert_eq!(rec.result, b"em_1");
    assert!(rec.completed_at.is_some() && rec.expires_at.is_some());
    assert!(!client.get_effect(&scope, "order-10.invoice").await.unwrap().found);
}

#[tokio::test]
async fn a_failed_effect_is_released_so_a_retry_runs_it() {
    let server = Server::start();
    let client = SeppClient::connect(server.url()).await.unwrap();
    let scope = unique("charge");
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let err = client
        .effect(&scope, "order-9.charge")
        .run(|| async move {
            r.fetch_add(1, Ordering::SeqCst);
            Err::<Vec<u8>, Box<dyn std::error::Error + Send + Sync>>("card network down".into())
        })
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "card network down");
    let r = runs.clone();
    let out = client
        .effect(&scope, "order-9.charge")
        .run(|| async move {
            r.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(b"ch_1".to_vec())
        })
        .await
        .unwrap();
    assert_eq!((out.value.as_slice(), out.replayed), (&b"ch_1"[..], false));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// Two workers, one job: A runs the effect; B arrives while A holds it.
async fn two_workers(raise: bool) -> (String, String, usize) {
    let server = Server::start();
    let client = SeppClient::connect(server.url()).await.unwrap();
    let scope = unique("mail.invoice");
    let mailer = Mailer::default();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let (finish_tx, finish_rx) = tokio::sync::oneshot::channel::<()>();

    let a = {
        let client = client.clone();
        let scope = scope.clone();
        let m = mailer.clone();
        tokio::spawn(async move {
            client
                .effect(scope, "order-9.invoice")
                .run(|| async move {
                    started_tx.send(()).unwrap();
                    let _ = finish_rx.await;
                    Ok::<_, Error>(m.send())
                })
                .await
        })
    };
    started_rx.await.unwrap(); // A holds the claim now
    let effect_b = client.effect(&scope, "order-9.invoice");
    let effect_b = if raise { effect_b.raise() } else { effect_b.wait() };
    let m = mailer.clone();
    let b = tokio::spawn(effect_b.run(move || async move { Ok::<_, Error>(m.send()) }));
    if raise {
        // B fails at once while A still holds the key.
        let b = b.await.unwrap();
        finish_tx.send(()).unwrap();
        let a = a.await.unwrap().unwrap();
        let b = match b {
            Err(Error::EffectInProgress(d)) => {
                assert!(d.message.contains("retry later"), "{}", d.message);
                "in progress, requeue".to_string()
            }
            other => panic!("raise: want EffectInProgress, got {other:?}"),
        };
        // The requeued delivery replays A's receipt.
        let again = client.effect(&scope, "order-9.invoice").raise().run(|| async { Ok::<_, Error>(b"never".to_vec()) }).await.unwrap();
        assert!(again.replayed && again.value == a.value);
        (String::from_utf8(a.value).unwrap(), b, mailer.sent())
    } else {
        // B waits on the server for A's result.
        finish_tx.send(()).unwrap();
        let a = a.await.unwrap().unwrap();
        let b = b.await.unwrap().unwrap();
        assert!(b.replayed);
        (String::from_utf8(a.value).unwrap(), String::from_utf8(b.value).unwrap(), mailer.sent())
    }
}

#[tokio::test]
async fn two_workers_one_job_wait() {
    let (a, b, mails) = two_workers(false).await;
    println!("in_flight='wait'     {{'A': '{a}', 'B': '{b}'}}   mails sent={mails}");
    assert_eq!((a.as_str(), b.as_str(), mails), ("em_1", "em_1", 1));
}

#[tokio::test]
async fn two_workers_one_job_raise() {
    let (a, b, mails) = two_workers(true).await;
    println!("in_flight='raise'    {{'A': '{a}', 'B': '{b}'}}   mails sent={mails}");
    assert_eq!((a.as_str(), b.as_str(), mails), ("em_1", "in progress, requeue", 1));
}

#[tokio::test]
async fn the_key_names_the_effect_not_the_delivery() {
    let server = Server::start();
    let client = SeppClient::connect(server.url()).await.unwrap();
    // Two jobs for order 9, by job id, by a key with a colon, by a key with a dot.
    for (keys, want) in [(["job-1", "job-2"], 2), (["order-9:invoice", "order-9:invoice"], 1), (["order-9.invoice", "order-9.invoice"], 1)]
    {
        let scope = unique("mail.invoice");
        let mailer = Mailer::default();
        for key in keys {
            let m = mailer.clone();
            client.effect(&scope, key).run(|| async move { Ok::<_, Error>(m.send()) }).await.unwrap();
        }
        assert_eq!(mailer.sent(), want, "keys {keys:?}");
    }
}

#[tokio::test]
async fn the_lease_is_extended_while_the_effect_runs() {
    let server = Server::start();
    let client = SeppClient::connect(server.url()).await.unwrap();
    let scope = unique("slow");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let (finish_tx, finish_rx) = tokio::sync::oneshot::channel::<()>();
    let a = {
        let client = client.clone();
        let scope = scope.clone();
        tokio::spawn(async move {
            client
                .effect(scope, "k")
                .lease(Duration::from_millis(300))
                .run(|| async move {
                    started_tx.send(()).unwrap();
                    let _ = finish_rx.await;
                    Ok::<_, Error>(b"done".to_vec())
                })
                .await
        })
    };
    started_rx.await.unwrap();
    // Four leases later the claim must still be held: without extensions it
    // would have expired and this claim would acquire it.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let b = client.effect(&scope, "k").raise().run(|| async { Ok::<_, Error>(b"B ran".to_vec()) }).await;
    assert!(matches!(b, Err(Error::EffectInProgress(_))), "{b:?}");
    finish_tx.send(()).unwrap();
    let a = a.await.unwrap().unwrap();
    assert_eq!(a.value, b"done");
}

#[tokio::test]
async fn low_level_claims_and_a_lost_lease() {
    let server = Server::start();
    let client = SeppClient::connect(server.url()).await.unwrap();
    let scope = unique("raw");
    let mut req = ClaimEffectRequest::new(&scope, "k");
    req.lease = Some(Duration::from_millis(200));
    let first = client.claim_effect(&req).await.unwrap();
    assert_eq!(first.state, EffectState::Acquired);
    assert!(!first.token.is_empty() && first.lease_expires_at.is_some());
    let busy = client.claim_effect(&req).await.unwrap();
    assert_eq!(busy.state, EffectState::InProgress);
    // Waiting on the server: the holder's lease ends, and this claim takes over.
    req.wait = Duration::from_secs(10);
    let second = client.claim_effect(&req).await.unwrap();
    assert_eq!(second.state, EffectState::Acquired);
    assert_ne!(second.token, first.token);
    // The first token is refused now.
    assert!(matches!(client.complete_effect(&first.token, b"x").await, Err(Error::LeaseLost(_))));
    assert!(matches!(client.extend_effect_lease(&first.token, Duration::from_secs(1)).await, Err(Error::LeaseLost(_))));
    assert!(client.extend_effect_lease(&second.token, Duration::from_secs(30)).await.unwrap().is_some());
    let stored = client.complete_effect(&second.token, b"r").await.unwrap();
    assert_eq!((stored.result.as_slice(), stored.already_completed), (&b"r"[..], false));
    assert!(stored.completed_at.is_some());
    // A resend of the same completion is recognised: nothing changes.
    let again = client.complete_effect(&second.token, b"other").await.unwrap();
    assert_eq!((again.result.as_slice(), again.already_completed), (&b"r"[..], true));
    let done = client.claim_effect(&ClaimEffectRequest::new(&scope, "k")).await.unwrap();
    assert_eq!((done.state, done.result.as_slice()), (EffectState::Completed, &b"r"[..]));
    // A released claim can be acquired again.
    let other = client.claim_effect(&ClaimEffectRequest::new(&scope, "k2")).await.unwrap();
    client.release_effect(&other.token).await.unwrap();
    assert_eq!(client.claim_effect(&ClaimEffectRequest::new(&scope, "k2")).await.unwrap().state, EffectState::Acquired);
}

#[tokio::test]
async fn fails_closed_on_bad_keys_and_an_unreachable_server() {
    let server = Server::start();
    let client = SeppClient::connect(server.url()).await.unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    for (scope, key) in [("mail", ""), ("", "k"), ("mail", &"k".repeat(257) as &str)] {
        let r = ran.clone();
        let e = client
            .effect(scope, key)
            .fail_open() // even so: a bad key is never run unprotected
            .run(|| async move {
                r.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Error>(Vec::new())
            })
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidField(_)), "{e}");
        assert!(e.message().contains("the effect did not run"), "{e}");
    }
    assert_eq!(ran.load(Ordering::SeqCst), 0);

    let port = common::free_port();
    let nowhere = SeppClient::builder(format!("http://127.0.0.1:{port}")).build().unwrap();
    let r = ran.clone();
    let e = nowhere
        .effect("mail", "k")
        .run(|| async move {
            r.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Error>(Vec::new())
        })
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e}");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "fail closed: the effect must not run");

    // Opting in runs it, and counts it.
    let before = sepp_rs::effect::unprotected_runs();
    let r = ran.clone();
    let out = nowhere
        .effect("mail", "k")
        .fail_open()
        .run(|| async move {
            r.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Error>(b"sent".to_vec())
        })
        .await
        .unwrap();
    assert!(out.unprotected && !out.replayed);
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(sepp_rs::effect::unprotected_runs(), before + 1);
}

#[tokio::test]
async fn json_results_round_trip() {
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Receipt {
        id: String,
        cents: u64,
    }
    let server = Server::start();
    let client = SeppClient::connect(server.url()).await.unwrap();
    let scope = unique("json");
    for round in 0..2 {
        let out = client
            .effect(&scope, "order-1")
            .run_json(|| async { Ok::<_, Error>(Receipt { id: "ch_1".into(), cents: 999 }) })
            .await
            .unwrap();
        assert_eq!(out.value, Receipt { id: "ch_1".into(), cents: 999 });
        assert_eq!(out.replayed, round == 1);
    }
}
