use sepp_rs::client::SeppClient;
use sepp_rs::EnqueueRequest;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = SeppClient::connect("http://localhost:50051").await?;

    // Derive the key from what the job is "about", so a retry of the same
    // logical enqueue carries the same key.
    let request = EnqueueRequest::new("emails", "receipt")?
        .with_idempotency_key("receipt-order-8a3f");

    let ack = client.enqueue(request).await?;
    if ack.deduplicated {
        println!("already enqueued earlier as {}", ack.job_id);
    } else {
        println!("enqueued {}", ack.job_id);
    }
    Ok(())
}
