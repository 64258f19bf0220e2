//! The client's retry policy is the one every Sepp client shares: the
//! figures and cases of `clients/retry-policy.json` (read from the folder
//! above this crate's), checked against `sepp_rs::retry`. Needs no server.

use std::path::PathBuf;
use std::time::Duration;

use sepp_rs::retry::{delay, BASE, CAP, DEFAULT_RETRIES};
use sepp_rs::Error;
use serde_json::Value;

fn policy() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../retry-policy.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ms(v: &Value) -> Duration {
    Duration::from_nanos((v.as_f64().expect("a number of milliseconds") * 1e6) as u64)
}

#[test]
fn the_figures_are_the_shared_ones() {
    let p = policy();
    assert_eq!(p["retries"].as_u64(), Some(u64::from(DEFAULT_RETRIES)), "retries");
    assert_eq!(ms(&p["base_ms"]), BASE, "base_ms");
    assert_eq!(ms(&p["cap_ms"]), CAP, "cap_ms");
}

#[test]
fn delay_gives_every_case() {
    let p = policy();
    let cases = p["cases"].as_array().expect("cases");
    assert!(!cases.is_empty(), "no cases");
    let mut wrong = Vec::new();
    for c in cases {
        let retry = c["retry"].as_u64().expect("retry") as u32;
        let random = c["random"].as_f64().expect("random");
        let want = ms(&c["delay_ms"]);
        let got = delay(retry, random);
        if got != want {
            wrong.push(format!("retry {retry}, random {random}: waits {got:?}, want {want:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn only_the_reasons_it_names_are_resent() {
    let p = policy();
    let retry_on: Vec<&str> = p["retry_on"].as_array().expect("retry_on").iter().map(|r| r.as_str().expect("a reason")).collect();
    assert_eq!(retry_on, ["UNAVAILABLE"], "the policy retries on other reasons than this client");
    for reason in retry_on {
        assert!(Error::from_reason(reason, "unavailable", "m").is_retryable(), "{reason}");
    }
    // Every other reason the server gives is final (the whole list is
    // checked against the generated enum in the crate's own tests).
    for reason in ["INTERNAL", "INVALID_FIELD", "LEASE_LOST", "IDEMPOTENCY_KEY_CONFLICT", "LIMIT_EXCEEDED"] {
        assert!(!Error::from_reason(reason, "x", "m").is_retryable(), "{reason}");
    }
}
