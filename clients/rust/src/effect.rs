//! Effect keys: make a handler's external effect (a mail, a charge) happen
//! once under at-least-once delivery.
//!
//! One call guards one effect. The first caller to claim `(scope, key)` runs
//! the closure and stores its result; any later call with the same key, from
//! any delivery on any worker, gets that result back without running it.
//! While one holder runs the effect, the others wait for its result
//! ([`Effect::wait`], the default) or fail at once with
//! [`Error::EffectInProgress`] ([`Effect::raise`]).
//!
//! ```no_run
//! use sepp_rs::client::SeppClient;
//!
//! # async fn send_invoice(order: &str) -> Result<String, Box<dyn std::error::Error + Send + Sync>> { Ok("em_1".into()) }
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let client = SeppClient::connect("http://localhost:50051").await?;
//! // Name the effect, not the delivery: "the invoice of order 9".
//! let receipt = client
//!     .effect("mail.invoice", "order-9.invoice")
//!     .run(|| async {
//!         let receipt = send_invoice("order-9").await?;
//!         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(receipt.into_bytes())
//!     })
//!     .await?;
//! println!("receipt {} (replayed: {})", String::from_utf8_lossy(&receipt.value), receipt.replayed);
//! # Ok(()) }
//! ```
//!
//! Any UTF-8 string of 1 to 256 bytes is a scope or key; no character is
//! reserved (`"order-9:invoice"` is fine). It fails closed: an invalid key, or
//! a server that cannot be reached, is an error and the closure does not run.
//! [`Effect::fail_open`] runs it unprotected instead, logging a warning (the
//! `log` crate) and counting the run ([`unprotected_runs`]).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::client::SeppClient;
use crate::error::Error;
use crate::pb::sepp_v1::Reason;
use crate::types::{check_effect_name, ClaimEffectRequest, EffectState};

pub use crate::types::MAX_EFFECT_NAME_BYTES;

static UNPROTECTED: AtomicU64 = AtomicU64::new(0);

/// How many effects this process ran unprotected ([`Effect::fail_open`] with
/// the server unreachable).
pub fn unprotected_runs() -> u64 {
    UNPROTECTED.load(Ordering::Relaxed)
}

/// What to do while another holder runs the effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlight {
    /// Wait for the holder: its result when it completes, or the key when it
    /// releases it or its lease ends.
    Wait,
    /// Fail at once with [`Error::EffectInProgress`]; retry the job later.
    Raise,
}

/// How [`Effect::run`] got its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectOutcome<T = Vec<u8>> {
    /// The closure's result, here or from the run that stored it.
    pub value: T,
    /// True when the closure did not run here: `value` is the result an
    /// earlier run stored.
    pub replayed: bool,
    /// True when the closure ran without a claim ([`Effect::fail_open`]).
    pub unprotected: bool,
}

// The effect helper is a layer on top of the client: it lives here, and the
// client's module knows nothing of it.
impl SeppClient {
    /// Guards one external effect with the effect key `(scope, key)`: see
    /// [`Effect`].
    ///
    /// ```no_run
    /// # async fn demo(client: sepp_rs::client::SeppClient) -> Result<(), sepp_rs::Error> {
    /// let outcome = client
    ///     .effect("mail.invoice", "order-9.invoice")
    ///     .wait()
    ///     .run(|| async { Ok::<_, sepp_rs::Error>(b"em_1".to_vec()) })
    ///     .await?;
    /// println!("receipt {:?}, replayed: {}", outcome.value, outcome.replayed);
    /// # Ok(()) }
    /// ```
    pub fn effect(&self, scope: impl Into<String>, key: impl Into<String>) -> Effect {
        Effect::new(self.clone(), scope.into(), key.into())
    }
}

/// One guarded effect, configured with builder methods and run with
/// [`run`](Effect::run) or [`run_json`](Effect::run_json). Made by
/// [`SeppClient::effect`].
#[derive(Debug, Clone)]
#[must_use = "an effect does nothing until .run(...) is awaited"]
pub struct Effect {
    client: SeppClient,
    scope: String,
    key: String,
    mode: InFlight,
    ttl: Duration,
    lease: Duration,
    wait_timeout: Duration,
    fail_open: bool,
}

impl Effect {
    fn new(client: SeppClient, scope: String, key: String) -> Self {
        Effect {
            client,
            scope,
            key,
            mode: InFlight::Wait,
            ttl: Duration::from_secs(24 * 3600),
            lease: Duration::from_secs(30),
            wait_timeout: Duration::from_secs(30),
            fail_open: false,
        }
    }

    /// While another holder runs the effect, wait for its result (the
    /// default).
    pub fn wait(mut self) -> Self {
        self.mode = InFlight::Wait;
        self
    }

    /// While another holder runs the effect, fail with
    /// [`Error::EffectInProgress`].
    pub fn raise(mut self) -> Self {
        self.mode = InFlight::Raise;
        self
    }

    /// Sets the in-flight mode.
    pub fn in_flight(mut self, mode: InFlight) -> Self {
        self.mode = mode;
        self
    }

    /// How long the completed record lives: make it outlast the longest
    /// redelivery of any job that may carry this effect. Default 24 h.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long a claim holds without an extension; it is extended every
    /// third of it while the closure runs. Default 30 s.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Bounds one wait for a holder in wait mode (at most 5 min); the claim
    /// is made again after it, until the holder finishes or lets go. Wrap
    /// the call in `tokio::time::timeout` to give up. Default 30 s.
    pub fn wait_timeout(mut self, d: Duration) -> Self {
        self.wait_timeout = d;
        self
    }

    /// Runs the effect unprotected when the server cannot be reached, with a
    /// warning and a count ([`unprotected_runs`]). Default off: fail closed.
    /// An invalid key fails closed all the same.
    pub fn fail_open(mut self) -> Self {
        self.fail_open = true;
        self
    }

    /// Runs `f` at most once for `(scope, key)` within the record's TTL and
    /// returns its result; a repeat returns the stored result without running
    /// `f`.
    ///
    /// While `f` runs, the claim's lease is extended. When `f` fails, the
    /// claim is released (so a retry can run it) and its error is returned as
    /// is. When the result cannot be recorded (the lease was lost, or the
    /// server went away after `f` ran) the error says so: a later claim may
    /// run the effect again.
    ///
    /// `E` is your error type; it only needs `From<sepp_rs::Error>`, which
    /// `Box<dyn std::error::Error + Send + Sync>` and `anyhow::Error` have.
    pub async fn run<F, Fut, E>(self, f: F) -> Result<EffectOutcome, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<u8>, E>>,
        E: From<Error>,
    {
        check_effect_name("scope", &self.scope)?;
        check_effect_name("key", &self.key)?;
        let c = &self.client;
        let wait = if self.mode == InFlight::Wait { self.wait_timeout } else { Duration::ZERO };
        let req =
            ClaimEffectRequest { scope: self.scope.clone(), key: self.key.clone(), ttl: Some(self.ttl), lease: Some(self.lease), wait };
        let claim = loop {
            let claim = match c.claim_effect(&req).await {
                Ok(claim) => claim,
                Err(e) if self.fail_open && e.is_retryable() => {
                    UNPROTECTED.fetch_add(1, Ordering::Relaxed);
                    log::warn!(
                        "sepp: effect server unreachable: running effect {}/{} UNPROTECTED (fail_open): {}",
                        self.scope,
                        self.key,
                        e
                    );
                    let value = f().await?;
                    return Ok(EffectOutcome { value, replayed: false, unprotected: true });
                }
                Err(mut e) => {
                    if let Some(d) = e.detail_mut() {
                        d.message = format!("effect {}/{} not run: {}", self.scope, self.key, d.message);
                    }
                    return Err(e.into());
                }
            };
            match claim.state {
                EffectState::Completed => return Ok(EffectOutcome { value: claim.result, replayed: true, unprotected: false }),
                EffectState::InProgress if self.mode == InFlight::Raise => {
                    let until = claim.lease_expires_at.map(crate::timefmt::format).unwrap_or_else(|| "its lease ends".into());
                    return Err(Error::new(
                        Reason::EffectInProgress,
                        "aborted",
                        format!("effect {}/{} is being run by another holder until {until}: retry later", self.scope, self.key),
                    )
                    .into());
                }
                // The wait ended with the holder still running: claim again.
                EffectState::InProgress => continue,
                EffectState::Acquired => break claim,
            }
        };
        let token = claim.token;
        let value = {
            let work = f();
            tokio::pin!(work);
            let extend = self.keep_alive(&token);
            tokio::pin!(extend);
            tokio::select! {
                r = &mut work => r,
                _ = &mut extend => unreachable!("keep_alive never ends"),
            }
        };
        match value {
            Err(e) => {
                // Let a retry run it. A release that fails leaves the claim to
                // expire with its lease; the closure's error matters more.
                let _ = c.release_effect(&token).await;
                Err(e)
            }
            Ok(v) => match c.complete_effect(&token, &v).await {
                // A resent call that finds its first one committed gets what
                // that one stored (the same bytes, in practice).
                Ok(stored) => {
                    let value = if stored.already_completed { stored.result } else { v };
                    Ok(EffectOutcome { value, replayed: false, unprotected: false })
                }
                Err(mut e) => {
                    if let Some(d) = e.detail_mut() {
                        d.message = format!(
                            "effect {}/{} ran, but its result could not be recorded (a later claim may run it again): {}",
                            self.scope, self.key, d.message
                        );
                    }
                    Err(e.into())
                }
            },
        }
    }

    /// [`run`](Effect::run) for a result of type `T`, stored and replayed as
    /// JSON.
    ///
    /// ```no_run
    /// # async fn demo(client: sepp_rs::client::SeppClient) -> Result<(), sepp_rs::Error> {
    /// let receipt: String = client
    ///     .effect("mail.invoice", "order-9.invoice")
    ///     .run_json(|| async { Ok::<_, sepp_rs::Error>("em_1".to_string()) })
    ///     .await?
    ///     .value;
    /// # Ok(()) }
    /// ```
    pub async fn run_json<T, F, Fut, E>(self, f: F) -> Result<EffectOutcome<T>, E>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        let scope = self.scope.clone();
        let key = self.key.clone();
        let out = self
            .run(|| async move {
                let v = f().await?;
                serde_json::to_vec(&v).map_err(|e| {
                    E::from(Error::new(Reason::InvalidField, "invalid_argument", format!("result: cannot be encoded as JSON: {e}")))
                })
            })
            .await?;
        let value = serde_json::from_slice(&out.value).map_err(|e| {
            E::from(Error::new(
                Reason::Internal,
                "internal",
                format!("effect {scope}/{key}: the stored result is not a {}: {e}", std::any::type_name::<T>()),
            ))
        })?;
        Ok(EffectOutcome { value, replayed: out.replayed, unprotected: out.unprotected })
    }

    /// Extends the claim every third of its lease; never returns. After
    /// `LEASE_LOST` it stops extending (completing will report it).
    async fn keep_alive(&self, token: &str) {
        let every = (self.lease / 3).max(Duration::from_millis(10));
        loop {
            tokio::time::sleep(every).await;
            if let Err(Error::LeaseLost(_)) = self.client.extend_effect_lease(token, self.lease).await {
                break;
            }
        }
        std::future::pending::<()>().await
    }
}
