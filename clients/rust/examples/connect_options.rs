//! A client with a bearer token, a timeout, retries and batching set, shared
//! by many tasks.
//!
//! ```text
//! cargo run --example connect_options  # against http://localhost:50051, or $SEPP_ADDR
//! ```
//!
//! For `https://` addresses build with `--features rustls` (or `native-tls`)
//! and, for a private CA, add `.tls_root_certificate_pem(pem)`.

use std::time::Duration;

use sepp_rs::client::SeppClient;
use sepp_rs::EnqueueRequest;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::var("SEPP_ADDR").unwrap_or_else(|_| "http://localhost:50051".into());
    let mut builder = SeppClient::builder(addr)
        .timeout(Duration::from_secs(10))
        .enqueue_retries(8) // keyed enqueues only; unkeyed ones are never resent
        .batching(true) // the default: concurrent enqueues share EnqueueBatch RPCs
        .max_in_flight(2);
    if let Ok(token) = std::env::var("SEPP_TOKEN") {
        builder = builder.bearer_token(token);
    }
    let client = builder.connect().await?;

    // One client, many tasks: clones share the connection pool and the batcher.
    let run = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis();
    let mut tasks = Vec::new();
    for i in 0..100 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let request = EnqueueRequest::new("emails", "receipt")?.with_idempotency_key(format!("receipt-{run}-{}", i % 50));
            client.enqueue(request).await
        }));
    }
    let (mut created, mut hits) = (0, 0);
    for t in tasks {
        if t.await??.deduplicated {
            hits += 1;
        } else {
            created += 1;
        }
    }
    println!("100 enqueues of 50 keys: created={created} deduplicated={hits}");
    Ok(())
}
