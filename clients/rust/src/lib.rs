//! The Rust client of [Sepp](https://github.com/sepp-dev/sepp), a job queue
//! whose retries never become duplicates.
//!
//! An enqueue that carries an idempotency key is created at most once per
//! queue within its dedup window: resend it after a timeout, a crash or a
//! network blip, and the server hands back the original job instead of a
//! second one.
//!
//! ```no_run
//! use sepp_rs::client::SeppClient;
//! use sepp_rs::EnqueueRequest;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = SeppClient::connect("http://localhost:50051").await?;
//!     let request = EnqueueRequest::new("emails", "receipt")?
//!         .with_idempotency_key("receipt-order-8a3f");
//!     let ack = client.enqueue(request).await?;
//!     if ack.deduplicated {
//!         println!("already enqueued earlier as {}", ack.job_id);
//!     } else {
//!         println!("enqueued {}", ack.job_id);
//!     }
//!     Ok(())
//! }
//! ```
//!
//! What is here:
//!
//! - [`client::SeppClient`]: enqueue (every field), batch enqueue, atomic or
//!   not, with per-item results, get and cancel a job, look up and release an
//!   idempotency key, list queues and jobs; bearer tokens and TLS through
//!   [`client::ClientBuilder`]. The raw worker calls (reserve, complete,
//!   fail, extend a lease) are there too, but no worker runtime.
//! - Keyed enqueues resent with the same key after transport errors, and
//!   concurrent enqueues coalesced into `EnqueueBatch` RPCs (natural
//!   batching), as the Go client does.
//! - [`Error`]: one variant per reason code (`IDEMPOTENCY_KEY_TOO_LONG` is
//!   [`Error::IdempotencyKeyTooLong`], ...), with the server's message.
//!   The client checks keys as the server does (1 to 256 bytes of UTF-8,
//!   counted in bytes) before sending anything.
//! - [`effect`]: effect keys for a handler's side effects, with result replay,
//!   lease extension, wait or raise for in-flight holders, and fail-closed
//!   checks.
//! - [`derive_key`]: the idempotency key a queue's `key_fields` derive from a
//!   JSON payload (RFC 8785 canonical JSON of the values the JSON pointers
//!   name), as the server derives it.
//!
//! It speaks Connect JSON (`POST /sepp.v1.JobService/Enqueue`, ...) over
//! HTTP/1.1 with `reqwest`, on Tokio. The wire types follow
//! `proto/sepp/v1/*.proto`, the one source of truth for the API.

#![warn(missing_docs)]
#![allow(clippy::missing_docs_in_private_items)]

mod batcher;
pub mod client;
pub mod effect;
mod error;
mod jsonkey;
mod request;
mod timefmt;
mod types;
mod wire;

pub use error::{Error, ErrorDetail, Result, TransportError};
pub use jsonkey::{derive_key, DeriveKeyError};
pub use request::{BatchResult, EnqueueAck, EnqueueRequest, DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES, MAX_NAME_BYTES};
pub use types::{
    ClaimEffectRequest, EffectClaim, EffectCompletion, EffectRecord, EffectState, FailOutcome, FailRequest, Job, JobPage, JobState,
    KeyLookup, KeyRelease, ListJobsRequest, QueueInfo, Reservation, ReserveRequest,
};
