//! Acceptance 1: the seed page's Rust example, saved unchanged as
//! `examples/idempotency.rs`, run against a fresh `sepp serve` on
//! localhost:50051 (the address the example names): the first run prints
//! `enqueued <id>`, the second `already enqueued earlier as <same id>`, and
//! the job is the one another client (the Go CLI) sees for the same key.
//!
//! Where `unshare -n` works, the scenario runs in a network namespace of its
//! own, so the host's port 50051 is neither needed nor taken; elsewhere it
//! takes the host's port in turn (a lock file) with other test programs.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{PortLock, Server};

const SEED_PORT: u16 = 50051;

/// The example binary `cargo test` built next to this test's binary.
fn example_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap(); // target/<profile>/deps/seed_example-<hash>
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let p = profile_dir.join("examples").join("idempotency");
    assert!(p.exists(), "{} is missing: `cargo test` builds the examples; run it, or `cargo build --examples`", p.display());
    p
}

fn run_example() -> String {
    let out = Command::new(example_bin()).output().unwrap();
    assert!(out.status.success(), "example failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A fresh server on 50051. Other clients' tests use the port too: wait for
/// it while someone else holds it.
fn seed_server() -> Server {
    for _ in 0..600 {
        if let Some(s) = Server::try_start(SEED_PORT, "") {
            return s;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("port {SEED_PORT} stayed taken for 5 minutes");
}

fn json_field(json: &str, field: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    match &v[field] {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The example as the documentation page prints it, byte for byte. (`cargo
/// fmt` would reflow `examples/idempotency.rs`; this test says so if it did.)
const SEED_SNIPPET: &str = r#"use sepp_rs::client::SeppClient;
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
"#;

#[test]
fn the_example_is_the_seed_snippet_unchanged() {
    assert_eq!(
        include_str!("../examples/idempotency.rs"),
        SEED_SNIPPET,
        "examples/idempotency.rs must stay exactly the documentation's snippet"
    );
}

/// Set in the copy of this test that runs inside its own network namespace.
const IN_NETNS: &str = "SEPP_RS_SEED_IN_NETNS";

#[test]
fn seed_example_runs_as_written() {
    if std::env::var_os(IN_NETNS).is_some() {
        // A loopback of our own: port 50051 is free, whoever else runs.
        let up = Command::new("ip").args(["link", "set", "lo", "up"]).status().unwrap();
        assert!(up.success(), "ip link set lo up");
        return seed_scenario();
    }
    if netns_available() {
        // Run this very test again inside a new network namespace, so the
        // example gets localhost:50051 without taking the host's port.
        let out = Command::new("unshare")
            .arg("-n")
            .arg(std::env::current_exe().unwrap())
            .args(["seed_example_runs_as_written", "--exact", "--nocapture", "--test-threads=1"])
            .env(IN_NETNS, "1")
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        print!("{text}");
        assert!(out.status.success(), "the seed scenario failed in its network namespace:\n{text}");
        assert!(text.contains("1 passed"), "{text}");
        return;
    }
    // No namespaces here: take the host's port 50051, in turn with the other
    // test programs that need it.
    let _lock = PortLock::acquire(SEED_PORT);
    seed_scenario();
}

/// Whether `unshare -n` works here (it needs CAP_SYS_ADMIN, e.g. root
/// outside a restricted container). `SEPP_RS_NO_NETNS=1` says no.
fn netns_available() -> bool {
    if std::env::var_os("SEPP_RS_NO_NETNS").is_some() {
        return false;
    }
    Command::new("unshare").args(["-n", "ip", "link", "set", "lo", "up"]).output().map(|o| o.status.success()).unwrap_or(false)
}

fn seed_scenario() {
    // Rust first, twice; then the Go CLI sends the same key.
    {
        let server = seed_server();
        let first = run_example();
        let id = first.strip_prefix("enqueued ").unwrap_or_else(|| panic!("first run printed {first:?}")).to_string();
        assert!(!id.is_empty());
        let second = run_example();
        assert_eq!(second, format!("already enqueued earlier as {id}"));
        println!("run 1: {first}\nrun 2: {second}");

        let cli = server.cli(&["enqueue", "--queue", "emails", "--type", "receipt", "--key", "receipt-order-8a3f", "--json"]);
        assert_eq!(json_field(&cli, "jobId"), id, "the Go CLI sees another job: {cli}");
        assert_eq!(json_field(&cli, "deduplicated"), "true");
    }

    // The Go CLI first: the Rust example is a hit on its job.
    {
        let server = seed_server();
        let cli = server.cli(&["enqueue", "--queue", "emails", "--type", "receipt", "--key", "receipt-order-8a3f", "--json"]);
        let id = json_field(&cli, "jobId");
        assert_eq!(json_field(&cli, "deduplicated"), "false");
        let run = run_example();
        assert_eq!(run, format!("already enqueued earlier as {id}"));
        println!("after the Go CLI: {run}");
    }
}
