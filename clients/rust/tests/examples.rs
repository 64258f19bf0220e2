//! Every example runs against a real server and prints what it promises.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::Server;

fn run_example(name: &str, server: &Server, args: &[&str]) -> String {
    let exe = std::env::current_exe().unwrap();
    let bin: PathBuf = exe.parent().unwrap().parent().unwrap().join("examples").join(name);
    assert!(bin.exists(), "{} is missing: `cargo test` builds the examples", bin.display());
    let out = Command::new(&bin).args(args).env("SEPP_ADDR", server.url()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "example {name} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    println!("--- {name}\n{stdout}");
    stdout
}

#[test]
fn feature_examples_run() {
    let server = Server::start();

    let out = run_example("batch", &server, &[]);
    assert!(out.contains("atomic: reason=IDEMPOTENCY_KEY_EMPTY index=Some(3)"), "{out}");
    assert!(out.contains("0: job ") && out.contains("deduplicated=true"), "{out}");
    assert!(out.contains("3: error IDEMPOTENCY_KEY_EMPTY"), "{out}");

    let out = run_example("errors", &server, &[]);
    assert!(out.contains("too long (IDEMPOTENCY_KEY_TOO_LONG): idempotency key is 258 bytes"), "{out}");
    assert!(out.contains("sepp: IDEMPOTENCY_KEY_EMPTY: "), "{out}");
    assert!(out.contains("not found (not_found)"), "{out}");
    assert!(out.contains("sepp: INVALID_FIELD: job_id:"), "{out}");

    let out = run_example("lookup", &server, &[]);
    assert!(out.contains("lookup: found=true"), "{out}");
    assert!(out.contains("cancelled: state=cancelled"), "{out}");
    assert!(out.contains("lookup after release: found=false"), "{out}");

    let out = run_example("effect", &server, &[]);
    assert!(out.contains("delivery 3: receipt em_1 (replayed: true)"), "{out}");
    assert!(out.contains("mails sent=1"), "{out}");
    assert!(out.contains("empty key: sepp: INVALID_FIELD: key: is empty"), "{out}");

    let out = run_example("connect_options", &server, &[]);
    assert!(out.contains("created=50 deduplicated=50"), "{out}");

    // The lab's figures, as the Go lab (examples/invoicelab) prints them.
    let out = run_example("invoicelab", &server, &[]);
    for line in [
        "plain handler                                 deliveries=2  mails sent=2",
        "handler under an effect key = job id          deliveries=2  mails sent=1",
        "in_flight='wait'     {'A': 'em_1', 'B': 'em_1'}   mails sent=1",
        "in_flight='raise'    {'A': 'em_1', 'B': 'in progress, requeue'}   mails sent=1",
        "key = job id: two jobs for order-9            -> mails sent=2",
        "key = 'order-9:invoice': the same two jobs    -> mails sent=1",
        "key = 'order-9.invoice': the same two jobs    -> mails sent=1",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }

    let out = run_example("bench_enqueue", &server, &["--addr", &server.url(), "-n", "2000", "-c", "8"]);
    let line: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((line["client"].as_str(), line["n"].as_u64(), line["c"].as_u64()), (Some("rust"), Some(2000), Some(8)));
}
