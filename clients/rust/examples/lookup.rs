//! Was this already processed? Look a key up, read and cancel its job,
//! release the key.
//!
//! ```text
//! cargo run --example lookup           # against http://localhost:50051, or $SEPP_ADDR
//! ```

use std::time::Duration;

use sepp_rs::client::SeppClient;
use sepp_rs::EnqueueRequest;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::var("SEPP_ADDR").unwrap_or_else(|_| "http://localhost:50051".into());
    let client = SeppClient::connect(addr).await?;

    let request = EnqueueRequest::new("emails", "reminder")?
        .with_idempotency_key("reminder-order-8a3f")
        .with_payload(br#"{"order":"8a3f"}"#.to_vec())
        .with_priority(5)
        .with_delay(Duration::from_secs(3600))
        .with_max_attempts(3)
        .with_header("trace-id", "4bf92f35");
    let ack = client.enqueue(request).await?;
    println!("enqueued {} (deduplicated: {})", ack.job_id, ack.deduplicated);

    // The ack says the key the enqueue was judged by (on a queue with
    // key_fields, the one the server derived from the payload).
    let key = ack.idempotency_key.expect("a keyed enqueue's ack has its key");
    let lookup = client.lookup_idempotency_key("emails", &key).await?;
    println!("lookup: found={} job={} state={} hits={}", lookup.found, lookup.job_id, lookup.state, lookup.hits);

    let job = client.get_job(&ack.job_id).await?;
    println!(
        "job: queue={} type={} state={} priority={} max_attempts={} headers={:?}",
        job.queue, job.job_type, job.state, job.priority, job.max_attempts, job.headers
    );

    let job = client.cancel_job(&ack.job_id).await?;
    println!("cancelled: state={}", job.state);

    // An operator's tool: forget the key now; the next enqueue with it makes a new job.
    let release = client.release_idempotency_key("emails", "reminder-order-8a3f").await?;
    println!("released={} (it pointed at {})", release.released, release.job_id);
    let lookup = client.lookup_idempotency_key("emails", "reminder-order-8a3f").await?;
    println!("lookup after release: found={}", lookup.found);
    Ok(())
}
