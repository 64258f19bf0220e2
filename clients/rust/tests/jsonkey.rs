//! derive_key against the Go server's own test vectors
//! (internal/jsonkey/testdata/vectors.json, written by its TestVectors): the
//! same key byte for byte, or a DeriveKeyError naming the same pointer with
//! the same message. Needs no server.

use std::path::PathBuf;

use sepp_rs::{derive_key, DeriveKeyError, Error};
use serde_json::Value;

fn vectors() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../internal/jsonkey/testdata/vectors.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("vectors.json is a JSON array")
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

#[test]
fn the_go_vectors_give_the_same_keys_and_errors() {
    let vectors = vectors();
    assert!(vectors.len() > 100, "only {} vectors", vectors.len());
    let mut failures = Vec::new();
    for v in &vectors {
        let name = v["name"].as_str().unwrap();
        let payload = match v.get("payload_hex") {
            Some(h) => unhex(h.as_str().unwrap()),
            None => v.get("payload").and_then(Value::as_str).unwrap_or("").as_bytes().to_vec(),
        };
        let pointers: Vec<&str> = v["pointers"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
        let got = derive_key(&payload, &pointers);
        match (v.get("key"), v.get("error")) {
            (Some(key), _) => {
                if got.as_deref() != Ok(key.as_str().unwrap()) {
                    failures.push(format!("{name}: got {got:?}, want {key}"));
                }
            }
            (None, Some(want)) => match got {
                Ok(key) => failures.push(format!("{name}: got key {key}, want an error")),
                Err(e) => {
                    if e.pointer() != want["pointer"].as_str().unwrap() || e.to_string() != want["message"].as_str().unwrap() {
                        failures.push(format!("{name}: got {:?} {e}, want {} {}", e.pointer(), want["pointer"], want["message"]));
                    }
                }
            },
            _ => panic!("{name}: neither key nor error"),
        }
    }
    assert!(failures.is_empty(), "{} of {} vectors differ:\n{}", failures.len(), vectors.len(), failures.join("\n"));
}

#[test]
fn readme_example() {
    assert_eq!(derive_key(br#"{"amount": 100, "account": "acc-123"}"#, &["/account", "/amount"]).unwrap(), r#"["acc-123",100]"#);
    let e: DeriveKeyError = derive_key(br#"{"account":"acc-123"}"#, &["/account", "/amount"]).unwrap_err();
    assert_eq!(e.pointer(), "/amount");
    assert!(e.to_string().starts_with(r#"field "/amount": not in the payload"#), "{e}");
    let e: Error = e.into();
    assert_eq!(e.reason(), "INVALID_FIELD");
    assert_eq!(e.detail().unwrap().metadata["pointer"], "/amount");
}

#[test]
fn numbers_as_ecmascript_writes_them() {
    for (literal, want) in [
        ("1e21", "1e+21"),
        ("1e20", "100000000000000000000"),
        ("1e-7", "1e-7"),
        ("1e-6", "0.000001"),
        ("1.5e-7", "1.5e-7"),
        ("100.0", "100"),
        ("-0.0", "0"),
        ("-0", "0"),
        ("0.1", "0.1"),
        ("123456789012345680000", "123456789012345680000"),
        ("-1.7976931348623157e308", "-1.7976931348623157e+308"),
        ("5e-324", "5e-324"),
    ] {
        let payload = format!(r#"{{"n":{literal}}}"#);
        assert_eq!(derive_key(payload.as_bytes(), &["/n"]).unwrap(), format!("[{want}]"), "{literal}");
    }
}

#[test]
fn nesting_as_deep_as_the_server_takes() {
    // The server takes 10000 levels (the object counts as one) and no more;
    // nothing here recurses, so the test thread's stack is enough.
    let ok = format!(r#"{{"a":{}{}}}"#, "[".repeat(9999), "]".repeat(9999));
    assert_eq!(derive_key(ok.as_bytes(), &["/a"]).unwrap(), format!("[{}{}]", "[".repeat(9999), "]".repeat(9999)));
    let deep = format!(r#"{{"a":{}{}}}"#, "[".repeat(10000), "]".repeat(10000));
    let e = derive_key(deep.as_bytes(), &["/a"]).unwrap_err();
    assert_eq!(e.pointer(), "");
    assert!(e.to_string().contains("nested more than 10000 deep"), "{e}");
}
