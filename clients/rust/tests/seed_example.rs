//! Acceptance 1: the seed page's Rust example, saved unchanged as
//! `examples/idempotency.rs`, run against a fresh `sepp serve` on
//! localhost:50051 (the address the example names): the first run prints
//! `enqueued <id>`, the second `already enqueued earlier as <same id>`, and
//! the job is the one another client (the Go CLI) sees for the same key.

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

#[test]
fn seed_example_runs_as_written() {
    let _lock = PortLock::acquire(SEED_PORT);

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
        assert_eq!(run_example(), format!("already enqueued earlier as {id}"));
    }
}
