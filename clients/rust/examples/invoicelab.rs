//! The lab of the post on handler-side idempotency, with this client: three
//! scenes of at-least-once delivery, and how many mails each sends with and
//! without an effect key. The Go version is `examples/invoicelab` in the
//! repository root; the figures should match it.
//!
//! ```text
//! cargo run --example invoicelab       # against http://localhost:50051, or $SEPP_ADDR
//! ```
//!
//! Every scene uses the real API: jobs are enqueued and reserved under short
//! leases, a "crash" is a worker that stops before it acknowledges, and the
//! mailer is a counter that returns receipts em_1, em_2, ...

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sepp_rs::client::SeppClient;
use sepp_rs::effect::InFlight;
use sepp_rs::{EnqueueRequest, Error, FailRequest, Reservation, ReserveRequest};

/// The job lease of the lab's queues: short, so redeliveries come fast.
const LEASE: Duration = Duration::from_millis(300);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Clone, Default)]
struct Mailer(Arc<AtomicUsize>);

impl Mailer {
    async fn send(&self, took: Duration) -> Result<Vec<u8>, Error> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::time::sleep(took).await;
        Ok(format!("em_{n}").into_bytes())
    }
    fn sent(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

struct Lab {
    client: SeppClient,
    run: u128,
    n: usize,
}

impl Lab {
    /// A queue and an effect scope for one scene.
    fn fresh(&mut self) -> (String, String) {
        self.n += 1;
        (format!("lab-{}-{}", self.run, self.n), format!("mail.invoice.{}.{}", self.run, self.n))
    }

    async fn reserve(&self, queue: &str) -> Result<Reservation, Error> {
        let request =
            ReserveRequest { queues: vec![queue.to_string()], lease: Some(LEASE), wait: Duration::from_secs(10), ..Default::default() };
        let mut jobs = self.client.reserve(&request).await?;
        Ok(jobs.pop().expect("a job within 10 s"))
    }

    /// The worker sends the mail and dies before Complete; the lease ends and
    /// the job is delivered again.
    async fn crash_before_ack(&mut self, guarded: bool) -> Result<(i32, usize), BoxError> {
        let (queue, scope) = self.fresh();
        self.client.enqueue(EnqueueRequest::new(&queue, "invoice")?.with_payload("order-9")).await?;
        let mailer = Mailer::default();
        let handle = |r: Reservation| {
            let (client, scope, mailer) = (self.client.clone(), scope.clone(), mailer.clone());
            async move {
                if !guarded {
                    return mailer.send(Duration::ZERO).await;
                }
                let out =
                    client.effect(scope, r.job.job_id.as_str()).ttl(Duration::from_secs(3600)).run(|| mailer.send(Duration::ZERO)).await?;
                Ok::<_, Error>(out.value)
            }
        };
        handle(self.reserve(&queue).await?).await?; // then the worker dies: no Complete
        let second = self.reserve(&queue).await?;
        let (id, token, attempt) = (second.job.job_id.clone(), second.lease_token.clone(), second.attempt);
        let receipt = handle(second).await?;
        self.client.complete(&id, &token, &receipt).await?;
        Ok((attempt, mailer.sent()))
    }

    /// Worker A is slow, the job's lease ends, worker B gets the same job
    /// while A still runs the effect.
    async fn two_workers(&mut self, mode: InFlight) -> Result<(String, String, usize), BoxError> {
        let (queue, scope) = self.fresh();
        self.client.enqueue(EnqueueRequest::new(&queue, "invoice")?).await?;
        let mailer = Mailer::default();
        self.reserve(&queue).await?; // A's delivery
        let a = {
            let (client, scope, mailer) = (self.client.clone(), scope.clone(), mailer.clone());
            tokio::spawn(async move {
                client.effect(scope, "order-9.invoice").ttl(Duration::from_secs(3600)).in_flight(mode).run(|| mailer.send(3 * LEASE)).await
            })
        };
        let b_job = self.reserve(&queue).await?; // after A's job lease ended
        let m = mailer.clone();
        let b = self
            .client
            .effect(&scope, "order-9.invoice")
            .ttl(Duration::from_secs(3600))
            .in_flight(mode)
            .run(|| m.send(Duration::ZERO))
            .await;
        match b {
            Ok(b) => {
                let a = a.await??;
                Ok((String::from_utf8(a.value)?, String::from_utf8(b.value)?, mailer.sent()))
            }
            Err(e @ Error::EffectInProgress(_)) => {
                let fail = FailRequest {
                    job_id: b_job.job.job_id.clone(),
                    lease_token: b_job.lease_token.clone(),
                    error: e.to_string(),
                    ..Default::default()
                };
                self.client.fail(&fail).await?;
                let a = String::from_utf8(a.await??.value)?;
                // The next delivery replays A's receipt.
                let next = self.reserve(&queue).await?;
                let m = mailer.clone();
                let replay = self.client.effect(&scope, "order-9.invoice").in_flight(mode).run(|| m.send(Duration::ZERO)).await?;
                assert!(replay.replayed && String::from_utf8_lossy(&replay.value) == a, "the delivery after the requeue ran the effect");
                self.client.complete(&next.job.job_id, &next.lease_token, &replay.value).await?;
                Ok((a, "in progress, requeue".into(), mailer.sent()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Two jobs for order 9, handled under `key` (or, when it is empty,
    /// under each job's id).
    async fn key_made_of(&mut self, key: &str) -> Result<usize, BoxError> {
        let (queue, scope) = self.fresh();
        let mailer = Mailer::default();
        for i in 0..2 {
            self.client.enqueue(EnqueueRequest::new(&queue, "invoice")?.with_payload(format!("order-9 #{i}"))).await?;
        }
        for _ in 0..2 {
            let r = self.reserve(&queue).await?;
            let k = if key.is_empty() { r.job.job_id.clone() } else { key.to_string() };
            let m = mailer.clone();
            let out = self.client.effect(&scope, k).ttl(Duration::from_secs(3600)).run(|| m.send(Duration::ZERO)).await?;
            self.client.complete(&r.job.job_id, &r.lease_token, &out.value).await?;
        }
        Ok(mailer.sent())
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let addr = std::env::var("SEPP_ADDR").unwrap_or_else(|_| "http://localhost:50051".into());
    let client = SeppClient::connect(addr).await?;
    let run = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
    let mut lab = Lab { client, run, n: 0 };

    println!("The crash before the ack\n");
    for guarded in [false, true] {
        let name = if guarded { "handler under an effect key = job id" } else { "plain handler" };
        let (deliveries, mails) = lab.crash_before_ack(guarded).await?;
        println!("{name:<45} deliveries={deliveries}  mails sent={mails}");
    }

    println!("\nTwo workers, one job\n");
    for (mode, name) in [(InFlight::Wait, "in_flight='wait'"), (InFlight::Raise, "in_flight='raise'")] {
        let (a, b, mails) = lab.two_workers(mode).await?;
        println!("{name:<20} {{'A': '{a}', 'B': '{b}'}}   mails sent={mails}");
    }

    println!("\nWhat the key is made of\n");
    for (label, key, note) in [
        ("key = job id: two jobs for order-9", "", "(the key must be the effect's identity, not the delivery's)"),
        ("key = 'order-9:invoice': the same two jobs", "order-9:invoice", "(a colon is an ordinary character in Sepp)"),
        ("key = 'order-9.invoice': the same two jobs", "order-9.invoice", ""),
    ] {
        let mails = lab.key_made_of(key).await?;
        println!("{label:<45} -> mails sent={mails}   {note}");
    }
    Ok(())
}
