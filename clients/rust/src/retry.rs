//! The retry policy every Sepp client shares (docs/clients.md, "Retries"):
//! `clients/retry-policy.json` in the repository states it, with the cases
//! each client's tests check its [`delay`] against.
//!
//! A call whose outcome is unknown, after a transport error or `UNAVAILABLE`
//! (the server shutting down, its deadline passed), is resent at most
//! [`DEFAULT_RETRIES`] times by default
//! ([`ClientBuilder::enqueue_retries`](crate::client::ClientBuilder::enqueue_retries)).
//! An enqueue is resent only when it carries an idempotency key, so that the
//! resend is a hit if the first try was written; `Complete`, `Fail` and
//! `CompleteEffect`, which the server recognises when repeated with the same
//! token, always are. Each resend waits a full-jitter delay: uniform between
//! zero and a ceiling that doubles from [`BASE`] up to [`CAP`], so that many
//! clients cut off at once do not come back in step.

use std::future::Future;
use std::time::Duration;

use crate::error::Result;

/// How many resends follow the first try, unless configured otherwise.
pub const DEFAULT_RETRIES: u32 = 5;

/// The ceiling of the first resend's delay.
pub const BASE: Duration = Duration::from_millis(50);

/// The highest ceiling: no resend waits longer.
pub const CAP: Duration = Duration::from_secs(2);

/// How long a resend waits, for `retry` earlier resends (0 for the first) and
/// `random` uniform in [0, 1): `random * min(CAP, BASE * 2^retry)`.
///
/// ```
/// use std::time::Duration;
/// use sepp_rs::retry::delay;
///
/// assert_eq!(delay(0, 0.5), Duration::from_millis(25));
/// assert_eq!(delay(3, 0.75), Duration::from_millis(300));
/// assert_eq!(delay(30, 0.5), Duration::from_millis(1000)); // the 2 s cap
/// ```
pub fn delay(retry: u32, random: f64) -> Duration {
    // BASE << 6 is already past CAP; the shift stays far from overflowing.
    let ceiling = if retry < 16 { CAP.min(BASE * (1u32 << retry)) } else { CAP };
    Duration::from_nanos((random * ceiling.as_nanos() as f64) as u64)
}

/// [`delay`] with a random draw.
pub(crate) fn jittered_delay(retry: u32) -> Duration {
    delay(retry, fastrand::f64())
}

/// Runs `call`, and runs it again after each error whose outcome is unknown
/// ([`Error::is_retryable`](crate::Error::is_retryable)), up to `retries`
/// times, waiting [`jittered_delay`] before each resend. For calls that are
/// safe to repeat: a keyed enqueue, or a call the server recognises when
/// repeated with the same token.
pub(crate) async fn resend<T, F, Fut>(retries: u32, call: F) -> Result<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut retry = 0;
    loop {
        match call().await {
            Err(e) if e.is_retryable() && retry < retries => {
                tokio::time::sleep(jittered_delay(retry)).await;
                retry += 1;
            }
            r => return r,
        }
    }
}
