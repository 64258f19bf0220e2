//! Effect keys: a side effect (here, a "mail") runs once per key however many
//! deliveries ask for it, and repeats replay its result.
//!
//! ```text
//! cargo run --example effect           # against http://localhost:50051, or $SEPP_ADDR
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sepp_rs::client::SeppClient;
use sepp_rs::Error;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::var("SEPP_ADDR").unwrap_or_else(|_| "http://localhost:50051".into());
    let client = SeppClient::connect(addr).await?;
    let sent = Arc::new(AtomicUsize::new(0));
    // A fresh key per run of this example, so the first delivery sends.
    let run = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis();
    let key = format!("order-{run}.invoice");

    // Three deliveries of jobs for the same order: one mail.
    for delivery in 1..=3 {
        let sent = sent.clone();
        let outcome = client
            .effect("mail.invoice", key.as_str())
            .ttl(Duration::from_secs(24 * 3600))
            .wait()
            .run(|| async move {
                let n = sent.fetch_add(1, Ordering::SeqCst) + 1;
                Ok::<_, Error>(format!("em_{n}").into_bytes())
            })
            .await?;
        println!("delivery {delivery}: receipt {} (replayed: {})", String::from_utf8_lossy(&outcome.value), outcome.replayed);
    }
    println!("mails sent={}", sent.load(Ordering::SeqCst));

    // A bad key fails closed: the effect does not run.
    match client.effect("mail.invoice", "").run(|| async { Ok::<_, Error>(Vec::new()) }).await {
        Err(e) => println!("empty key: {e}"),
        Ok(_) => println!("empty key ran?"),
    }
    Ok(())
}
