//! Throughput of keyed enqueues through one shared client: `-n` jobs with
//! unique keys and 256-byte payloads on queue "bench", from `-c` concurrent
//! callers in one process. Prints one JSON line.
//!
//! ```text
//! cargo run --release --example bench_enqueue -- --addr http://127.0.0.1:50051 -n 100000 -c 32
//! {"client":"rust","n":100000,"c":32,"seconds":1.23,"jobs_per_sec":81300}
//! ```
//!
//! Other flags: `--payload BYTES` (default 256), `--no-batching` (one RPC per
//! enqueue), `--in-flight N` (coalesced RPCs in flight, default 2).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use sepp_rs::client::SeppClient;
use sepp_rs::EnqueueRequest;

struct Flags {
    addr: String,
    n: usize,
    c: usize,
    payload: usize,
    batching: bool,
    in_flight: usize,
}

fn parse_flags() -> Result<Flags, String> {
    let mut f = Flags { addr: "http://127.0.0.1:50051".into(), n: 100_000, c: 32, payload: 256, batching: true, in_flight: 2 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match a.trim_start_matches('-') {
            "addr" => f.addr = value("--addr")?,
            "n" => f.n = value("-n")?.parse().map_err(|e| format!("-n: {e}"))?,
            "c" => f.c = value("-c")?.parse().map_err(|e| format!("-c: {e}"))?,
            "payload" => f.payload = value("--payload")?.parse().map_err(|e| format!("--payload: {e}"))?,
            "in-flight" => f.in_flight = value("--in-flight")?.parse().map_err(|e| format!("--in-flight: {e}"))?,
            "no-batching" => f.batching = false,
            "h" | "help" => {
                return Err("usage: bench_enqueue [--addr URL] [-n N] [-c C] [--payload BYTES] [--no-batching] [--in-flight N]".into())
            }
            other => return Err(format!("unknown flag {other:?}; try --help")),
        }
    }
    if f.c == 0 || f.n == 0 {
        return Err("-n and -c must be > 0".into());
    }
    Ok(f)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let flags = match parse_flags() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let client = SeppClient::builder(&flags.addr).batching(flags.batching).max_in_flight(flags.in_flight).connect().await?;
    // Keys unique to this run, so a rerun against the same server creates
    // new jobs rather than hitting old records.
    let run = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
    let payload = Arc::new(vec![b'x'; flags.payload]);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut callers = Vec::with_capacity(flags.c);
    for _ in 0..flags.c {
        let (client, payload, next, n) = (client.clone(), payload.clone(), next.clone(), flags.n);
        callers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, sepp_rs::Error>(());
                }
                let request = EnqueueRequest::new("bench", "bench")?
                    .with_idempotency_key(format!("rs-bench-{run}-{i}"))
                    .with_payload(payload.as_slice());
                let ack = client.enqueue(request).await?;
                if ack.deduplicated {
                    return Err(sepp_rs::Error::from_reason("INTERNAL", "internal", format!("key {i} was a hit: keys must be unique")));
                }
            }
        }));
    }
    for c in callers {
        c.await??;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"client\":\"rust\",\"n\":{},\"c\":{},\"seconds\":{:.3},\"jobs_per_sec\":{:.0}}}",
        flags.n,
        flags.c,
        secs,
        flags.n as f64 / secs
    );
    Ok(())
}
