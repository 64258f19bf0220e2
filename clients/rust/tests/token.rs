//! The bearer token goes out on every call: a plain forwarder in front of the
//! real server looks at the wire.

mod common;

#[path = "common/forward.rs"]
mod forward;

use common::{unique, Server};
use sepp_rs::client::SeppClient;
use sepp_rs::EnqueueRequest;

#[tokio::test]
async fn bearer_token_goes_out_on_every_call() {
    let server = Server::start();
    let tap = forward::Forwarder::plain(server.port).await;
    let client = SeppClient::builder(format!("http://{}", tap.addr)).bearer_token("s3cret-token").connect().await.unwrap();
    let q = unique("token");
    client.enqueue(EnqueueRequest::new(&q, "t").unwrap().with_idempotency_key("tok-1")).await.unwrap();
    assert!(client.lookup_idempotency_key(&q, "tok-1").await.unwrap().found);
    let wire = tap.sent_lowercase();
    assert_eq!(wire.matches("post /").count(), 3, "health, enqueue, lookup:\n{wire}");
    assert_eq!(wire.matches("authorization: bearer s3cret-token\r\n").count(), 3, "{wire}");
    // Connect's binary encoding: protobuf messages, not JSON.
    assert_eq!(wire.matches("content-type: application/proto\r\n").count(), 3, "{wire}");

    // Without a token, no Authorization header at all.
    let tap = forward::Forwarder::plain(server.port).await;
    let client = SeppClient::connect(format!("http://{}", tap.addr)).await.unwrap();
    client.enqueue(EnqueueRequest::new(&q, "t").unwrap()).await.unwrap();
    assert!(!tap.sent_lowercase().contains("authorization"));
}
