//! Batch enqueue, atomic and not: one result per job, in order.
//!
//! ```text
//! cargo run --example batch            # against http://localhost:50051, or $SEPP_ADDR
//! ```

use sepp_rs::client::SeppClient;
use sepp_rs::EnqueueRequest;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::var("SEPP_ADDR").unwrap_or_else(|_| "http://localhost:50051".into());
    let client = SeppClient::connect(addr).await?;

    let first = client.enqueue(EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("order-1")).await?;
    println!("order-1 enqueued as {}", first.job_id);

    let jobs = || -> Result<Vec<EnqueueRequest>, sepp_rs::Error> {
        Ok(vec![
            EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("order-1"), // already recorded
            EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("order-2"), // new
            EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("order-2"), // same key again
            EnqueueRequest::new("emails", "receipt")?.with_idempotency_key(""),        // empty key: invalid
        ])
    };

    // Atomic: the invalid job fails the whole call, and nothing is written.
    match client.enqueue_batch(jobs()?, true).await {
        Err(e) => println!("atomic: reason={} index={:?}\n  {}", e.reason(), e.index(), e.message()),
        Ok(_) => println!("atomic: written"),
    }

    // Not atomic: one result per job, in order.
    for (i, result) in client.enqueue_batch(jobs()?, false).await?.into_iter().enumerate() {
        match result {
            Ok(ack) => println!("{i}: job {} deduplicated={}", ack.job_id, ack.deduplicated),
            Err(e) => println!("{i}: error {}: {}", e.reason(), e.message()),
        }
    }
    Ok(())
}
