//! Typed errors: match on the reason, read the message.
//!
//! ```text
//! cargo run --example errors           # against http://localhost:50051, or $SEPP_ADDR
//! ```

use sepp_rs::client::SeppClient;
use sepp_rs::{EnqueueRequest, Error};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::var("SEPP_ADDR").unwrap_or_else(|_| "http://localhost:50051".into());
    let client = SeppClient::connect(addr).await?;

    // Checked before sending: 129 two-byte characters are 258 bytes.
    let request = EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("é".repeat(129));
    match client.enqueue(request).await {
        Err(Error::IdempotencyKeyTooLong(d)) => println!("too long ({}): {}", d.reason, d.message),
        other => println!("unexpected: {other:?}"),
    }

    // An empty key is an error, never "no key".
    let request = EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("");
    if let Err(e) = client.enqueue(request).await {
        println!("{e}");
    }

    // Answered by the server.
    match client.get_job("0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d").await {
        Err(Error::JobNotFound(d)) => println!("not found ({}): {}", d.code, d.message),
        other => println!("unexpected: {other:?}"),
    }
    match client.get_job("not-an-id").await {
        Err(e @ Error::InvalidField(_)) => println!("{e}"),
        other => println!("unexpected: {other:?}"),
    }
    Ok(())
}
