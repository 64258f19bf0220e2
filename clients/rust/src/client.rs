//! The client: [`SeppClient`] and its [`ClientBuilder`].
//!
//! ```no_run
//! use sepp_rs::client::SeppClient;
//! use sepp_rs::EnqueueRequest;
//!
//! # async fn demo() -> Result<(), sepp_rs::Error> {
//! let client = SeppClient::connect("http://localhost:50051").await?;
//! let ack = client
//!     .enqueue(EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("receipt-order-8a3f"))
//!     .await?;
//! println!("{} (deduplicated: {})", ack.job_id, ack.deduplicated);
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::batcher::Batcher;
use crate::effect::Effect;
use crate::error::{decode_error_info, Error, ErrorDetail, Result, TransportError};
use crate::request::{check_idempotency_key, BatchResult, EnqueueAck, EnqueueRequest, DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES};
use crate::types::*;
use crate::wire;

/// A client of one Sepp server (or of a load balancer in front of several),
/// speaking Connect JSON over HTTP.
///
/// It is cheap to clone (clones share one connection pool and one batcher)
/// and `Send + Sync`, so one client is meant to be shared by every task of a
/// program. Concurrent [`enqueue`](SeppClient::enqueue) calls are coalesced
/// into `EnqueueBatch` RPCs (natural batching: an idle client sends at once;
/// while the batches in flight, two by default, are busy, the next calls
/// gather and go together), and each caller still gets its own ack or error.
/// A keyed enqueue whose fate is unknown after a transport error is resent
/// with the same key, so the retry cannot become a duplicate; an unkeyed one
/// is never resent.
///
/// Every method needs a Tokio runtime.
#[derive(Clone)]
pub struct SeppClient {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for SeppClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeppClient").field("address", &self.inner.base).field("config", &self.inner.cfg).finish()
    }
}

pub(crate) struct Inner {
    http: reqwest::Client,
    base: String,
    auth: Option<HeaderValue>,
    pub(crate) cfg: Config,
    pub(crate) batcher: Option<Batcher>,
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub timeout: Duration,
    pub enqueue_retries: u32,
    pub retry_backoff_max: Duration,
    pub batching: bool,
    pub max_in_flight: usize,
    pub max_batch_size: usize,
    pub max_batch_bytes: usize,
    pub max_key_bytes: Option<usize>,
    pub wait_for_server: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            timeout: Duration::from_secs(30),
            enqueue_retries: 8,
            retry_backoff_max: Duration::from_secs(2),
            batching: true,
            max_in_flight: 2,
            max_batch_size: 1000,
            max_batch_bytes: 4 << 20,
            max_key_bytes: Some(DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES),
            wait_for_server: None,
        }
    }
}

/// Configures a [`SeppClient`]: token, TLS, timeouts, retries, batching.
///
/// ```
/// use std::time::Duration;
/// use sepp_rs::client::SeppClient;
///
/// let client = SeppClient::builder("http://127.0.0.1:50051")
///     .bearer_token("s3cret")
///     .timeout(Duration::from_secs(10))
///     .enqueue_retries(5)
///     .max_in_flight(4)
///     .build()?; // no network yet; `.connect().await` also checks the server
/// # drop(client);
/// # Ok::<(), sepp_rs::Error>(())
/// ```
#[derive(Debug)]
pub struct ClientBuilder {
    addr: String,
    token: Option<String>,
    cfg: Config,
    #[cfg(any(feature = "rustls", feature = "native-tls"))]
    roots: Vec<Vec<u8>>,
    #[cfg(feature = "rustls")]
    identity: Option<Vec<u8>>,
}

impl ClientBuilder {
    fn new(addr: impl Into<String>) -> Self {
        ClientBuilder {
            addr: addr.into(),
            token: None,
            cfg: Config::default(),
            #[cfg(any(feature = "rustls", feature = "native-tls"))]
            roots: Vec::new(),
            #[cfg(feature = "rustls")]
            identity: None,
        }
    }

    /// Sends `Authorization: Bearer <token>` on every call (for a server with
    /// `[auth]`).
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Bounds each RPC (sent to the server as `Connect-Timeout-Ms` too).
    /// Default 30 s. Effect claims that wait get their wait on top.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.cfg.timeout = timeout;
        self
    }

    /// How many times a keyed enqueue (or a batch whose jobs all have keys,
    /// or a Complete, Fail or CompleteEffect, which the server recognises when
    /// repeated with the same token) is resent after a transport error or
    /// `UNAVAILABLE`, with backoff from
    /// 25 ms doubling up to [`retry_backoff_max`](Self::retry_backoff_max).
    /// Unkeyed enqueues are never resent: a resend could create a duplicate.
    /// Default 8 (about 5 s of retrying, enough for a server restart); 0 turns
    /// retries off.
    pub fn enqueue_retries(mut self, retries: u32) -> Self {
        self.cfg.enqueue_retries = retries;
        self
    }

    /// The longest wait between two resends. Default 2 s.
    pub fn retry_backoff_max(mut self, max: Duration) -> Self {
        self.cfg.retry_backoff_max = max;
        self
    }

    /// Turns the coalescing of concurrent enqueues into `EnqueueBatch` RPCs
    /// on or off. Default on.
    pub fn batching(mut self, on: bool) -> Self {
        self.cfg.batching = on;
        self
    }

    /// Bounds the coalesced RPCs in flight at once; calls gather only while
    /// all of them are busy. Default 2.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.cfg.max_in_flight = n.max(1);
        self
    }

    /// Bounds the jobs of one coalesced RPC; keep it at or below the server's
    /// `max_batch_size` (the client halves a batch the server finds too
    /// large, and remembers). Default 1000.
    pub fn max_batch_size(mut self, n: usize) -> Self {
        self.cfg.max_batch_size = n.max(1);
        self
    }

    /// Bounds the payload bytes of one coalesced RPC. Default 4 MiB.
    pub fn max_batch_bytes(mut self, n: usize) -> Self {
        self.cfg.max_batch_bytes = n.max(1);
        self
    }

    /// The key length checked before sending: set it to the server's
    /// `max_idempotency_key_bytes` if you changed that. `None` leaves the
    /// length to the server (an empty key is refused locally all the same).
    /// Default `Some(256)`.
    pub fn max_idempotency_key_bytes(mut self, max: Option<usize>) -> Self {
        self.cfg.max_key_bytes = max;
        self
    }

    /// Makes [`connect`](Self::connect) wait up to `max` for a server that
    /// is not up yet (or says NOT_SERVING), checking again with backoff from
    /// 100 ms doubling to 5 s and logging each wait (the `log` crate), like
    /// the Go client's `Connect`. Default: one check, failing at once, so a
    /// program started without its server says so.
    pub fn wait_for_server(mut self, max: Duration) -> Self {
        self.cfg.wait_for_server = Some(max);
        self
    }

    /// Trusts this PEM certificate (a private CA) for `https://` addresses,
    /// besides the system's roots. Needs the `rustls` or `native-tls` feature.
    #[cfg(any(feature = "rustls", feature = "native-tls"))]
    pub fn tls_root_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.roots.push(pem.into());
        self
    }

    /// Presents this client certificate and key (one PEM with both) for
    /// mutual TLS. Needs the `rustls` feature.
    #[cfg(feature = "rustls")]
    pub fn tls_identity_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.identity = Some(pem.into());
        self
    }

    /// Builds the client without contacting the server.
    pub fn build(self) -> Result<SeppClient> {
        let base = normalize_address(&self.addr)?;
        if base.starts_with("https://") && !cfg!(any(feature = "rustls", feature = "native-tls")) {
            return Err(Error::Config(format!(
                "address {:?} uses TLS, but sepp-rs was built without it: enable the `rustls` (or `native-tls`) feature",
                self.addr
            )));
        }
        #[allow(unused_mut)] // changed only with a TLS feature
        let mut http = reqwest::Client::builder().tcp_nodelay(true).pool_idle_timeout(Duration::from_secs(60)).pool_max_idle_per_host(64);
        #[cfg(any(feature = "rustls", feature = "native-tls"))]
        for pem in &self.roots {
            let cert = reqwest::Certificate::from_pem(pem).map_err(|e| Error::Config(format!("TLS root certificate: {e}")))?;
            http = http.add_root_certificate(cert);
        }
        #[cfg(feature = "rustls")]
        if let Some(pem) = &self.identity {
            let id = reqwest::Identity::from_pem(pem).map_err(|e| Error::Config(format!("TLS client identity: {e}")))?;
            http = http.identity(id);
        }
        let http = http.build().map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        let auth = match &self.token {
            None => None,
            Some(t) => {
                let mut v = HeaderValue::from_str(&format!("Bearer {t}"))
                    .map_err(|_| Error::Config("bearer token: must be printable ASCII".into()))?;
                v.set_sensitive(true);
                Some(v)
            }
        };
        let batcher = if self.cfg.batching { Some(Batcher::new(self.cfg.max_batch_size)) } else { None };
        Ok(SeppClient { inner: Arc::new(Inner { http, base, auth, cfg: self.cfg, batcher }) })
    }

    /// Builds the client and checks that the server answers its health check
    /// (waiting for it first if [`wait_for_server`](Self::wait_for_server)
    /// says so).
    pub async fn connect(self) -> Result<SeppClient> {
        let client = self.build()?;
        let deadline = client.inner.cfg.wait_for_server.map(|max| tokio::time::Instant::now() + max);
        let mut wait = Duration::from_millis(100);
        for attempt in 1u32.. {
            let err = match client.health().await {
                Ok(()) => {
                    if attempt > 1 {
                        log::info!("sepp: server is up at {} after {attempt} tries", client.inner.base);
                    }
                    return Ok(client);
                }
                Err(e) => e,
            };
            let retry = err.is_retryable() && deadline.map_or(false, |d| tokio::time::Instant::now() + wait < d);
            if !retry {
                return Err(err);
            }
            log::warn!("sepp: waiting for the server (try {attempt}, next in {wait:?}): {err}");
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(5));
        }
        unreachable!("the loop returns")
    }
}

/// Turns `http://host:port[/prefix]` (or a bare `host:port`) into the base URL
/// the method paths are appended to.
fn normalize_address(addr: &str) -> Result<String> {
    let a = addr.trim();
    let with_scheme = if a.contains("://") { a.to_string() } else { format!("http://{a}") };
    let (scheme, rest) = with_scheme.split_once("://").expect("has a scheme");
    let scheme = scheme.to_ascii_lowercase();
    let scheme = match scheme.as_str() {
        "http" | "h2c" => "http",
        "https" => "https",
        other => {
            return Err(Error::Config(format!(
                "address {addr:?}: scheme {other:?} is not supported; use http://host:port or https://host:port"
            )))
        }
    };
    let rest = rest.trim_end_matches('/');
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || host.contains(['?', '#', ' ']) {
        return Err(Error::Config(format!("address {addr:?}: want http://host:port")));
    }
    let url = format!("{scheme}://{rest}");
    reqwest::Url::parse(&url).map_err(|e| Error::Config(format!("address {addr:?}: {e}")))?;
    Ok(url)
}

impl SeppClient {
    /// Connects to the server at `addr` (`"http://localhost:50051"`) with the
    /// defaults, and checks that it answers.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), sepp_rs::Error> {
    /// let client = sepp_rs::client::SeppClient::connect("http://localhost:50051").await?;
    /// # drop(client); Ok(()) }
    /// ```
    ///
    /// A server that cannot be reached is an [`Error::Transport`] whose
    /// message names the address.
    pub async fn connect(addr: impl Into<String>) -> Result<SeppClient> {
        ClientBuilder::new(addr).connect().await
    }

    /// A builder for a client with a token, TLS, other timeouts, retries or
    /// batching.
    pub fn builder(addr: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(addr)
    }

    /// The base URL calls go to.
    pub fn address(&self) -> &str {
        &self.inner.base
    }

    /// Checks that the server answers and says SERVING (the Connect form of
    /// `grpc.health.v1.Health/Check`).
    pub async fn health(&self) -> Result<()> {
        let h: wire::WireHealth = self.inner.unary("grpc.health.v1.Health/Check", &wire::Empty {}).await?;
        if matches!(h.status.as_str(), "SERVING" | "SERVING_STATUS_SERVING" | "1") {
            Ok(())
        } else {
            Err(Error::from_reason(
                "UNAVAILABLE",
                "unavailable",
                format!("the server at {} says {}: its store cannot be read; retry later or use another node", self.inner.base, h.status),
            ))
        }
    }

    /// Enqueues one job and returns the server's ack.
    ///
    /// With an idempotency key, a later enqueue of the same key on the same
    /// queue, inside its dedup window, creates nothing: its ack has
    /// `deduplicated = true` and the original `job_id`.
    ///
    /// The key is checked first (1 to 256 bytes of UTF-8; see
    /// [`EnqueueRequest::validate`]); a bad key fails here and nothing is sent.
    /// After a transport error or `UNAVAILABLE` a keyed enqueue is resent with
    /// the same key (see [`ClientBuilder::enqueue_retries`]); the error is
    /// returned only when the retries run out.
    ///
    /// A key the server would refuse never leaves the process. This client
    /// points at a port where nothing listens, and still gets the key error:
    ///
    /// ```
    /// use sepp_rs::client::SeppClient;
    /// use sepp_rs::{EnqueueRequest, Error};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// let client = SeppClient::builder("http://127.0.0.1:9").build()?;
    /// let request = EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("é".repeat(129));
    /// let err = client.enqueue(request).await.unwrap_err();
    /// assert!(matches!(err, Error::IdempotencyKeyTooLong(_)));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "sepp: IDEMPOTENCY_KEY_TOO_LONG: idempotency key is 258 bytes; the limit is 256 \
    ///      (max_idempotency_key_bytes): use a shorter, stable id such as the entity or event id"
    /// );
    /// # Ok(()) }
    /// ```
    ///
    /// ```no_run
    /// # async fn demo(client: sepp_rs::client::SeppClient) -> Result<(), sepp_rs::Error> {
    /// use sepp_rs::EnqueueRequest;
    /// let ack = client
    ///     .enqueue(EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("receipt-order-8a3f"))
    ///     .await?;
    /// if ack.deduplicated {
    ///     println!("already enqueued earlier as {}", ack.job_id);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn enqueue(&self, request: EnqueueRequest) -> Result<EnqueueAck> {
        request.check(self.inner.cfg.max_key_bytes)?;
        let keyed = request.idempotency_key.is_some();
        let body = Bytes::from(wire::encode_enqueue(&request));
        if self.inner.batcher.is_some() {
            Inner::enqueue_batched(&self.inner, body, keyed, request.payload.len()).await
        } else {
            self.inner.enqueue_direct(body, keyed).await
        }
    }

    /// Enqueues `requests` in one `EnqueueBatch` RPC and returns one result
    /// per job, in order.
    ///
    /// Not atomic: each job is judged alone; a failed job's result is its own
    /// error (checked locally when the client can, by the server otherwise).
    /// Atomic: all jobs are validated first and written in one transaction,
    /// or none is; a bad job fails the whole call with an error whose
    /// [`index`](Error::index) names it. A dedup hit is never a failure.
    ///
    /// When every job has a key, a batch whose fate is unknown after a
    /// transport error is resent, like a keyed enqueue.
    ///
    /// ```no_run
    /// # async fn demo(client: sepp_rs::client::SeppClient) -> Result<(), sepp_rs::Error> {
    /// use sepp_rs::EnqueueRequest;
    /// let jobs = vec![
    ///     EnqueueRequest::new("emails", "receipt")?.with_idempotency_key("order-1"),
    ///     EnqueueRequest::new("emails", "receipt")?.with_idempotency_key(""), // empty: an error
    /// ];
    /// for (i, result) in client.enqueue_batch(jobs, false).await?.into_iter().enumerate() {
    ///     match result {
    ///         Ok(ack) => println!("{i}: {} deduplicated={}", ack.job_id, ack.deduplicated),
    ///         Err(e) => println!("{i}: {e}"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_batch(&self, requests: Vec<EnqueueRequest>, atomic: bool) -> Result<Vec<BatchResult>> {
        let mut results: Vec<Option<BatchResult>> = (0..requests.len()).map(|_| None).collect();
        let mut bodies = Vec::with_capacity(requests.len());
        let mut index = Vec::with_capacity(requests.len());
        let mut all_keyed = true;
        for (i, r) in requests.iter().enumerate() {
            if let Err(mut e) = r.check(self.inner.cfg.max_key_bytes) {
                if atomic {
                    if let Some(d) = e.detail_mut() {
                        d.index = Some(i);
                        d.message = format!("jobs[{i}]: {}", d.message);
                        d.metadata.insert("index".into(), i.to_string());
                    }
                    return Err(e);
                }
                results[i] = Some(Err(e));
                continue;
            }
            all_keyed &= r.idempotency_key.is_some();
            bodies.push(wire::encode_enqueue(r));
            index.push(i);
        }
        if !bodies.is_empty() {
            let body = Bytes::from(wire::encode_batch(bodies.iter().map(|b| b.as_slice()), atomic));
            let mut attempt = 0;
            let res: wire::WireBatchResponse = loop {
                match self.inner.post("sepp.v1.JobService/EnqueueBatch", body.clone(), self.inner.cfg.timeout).await {
                    Ok(b) => break self.inner.decode(&b)?,
                    Err(e) if all_keyed && e.is_retryable() && attempt < self.inner.cfg.enqueue_retries => {
                        tokio::time::sleep(self.inner.backoff(attempt)).await;
                        attempt += 1;
                    }
                    Err(e) => return Err(e),
                }
            };
            if res.results.len() != index.len() {
                return Err(wrong_count(res.results.len(), index.len()));
            }
            for (k, r) in res.results.into_iter().enumerate() {
                results[index[k]] = Some(batch_result(r));
            }
        }
        Ok(results.into_iter().map(|r| r.expect("every job has a result")).collect())
    }

    /// Reads a job. An unknown id is [`Error::JobNotFound`].
    pub async fn get_job(&self, job_id: &str) -> Result<Job> {
        let r: wire::WireJobResponse = self.inner.unary("sepp.v1.JobService/GetJob", &wire::JobIdRequest { job_id }).await?;
        Ok(r.job.unwrap_or_default().into())
    }

    /// Cancels a job that has not finished and returns it; a finished job is
    /// returned unchanged.
    pub async fn cancel_job(&self, job_id: &str) -> Result<Job> {
        let r: wire::WireJobResponse = self.inner.unary("sepp.v1.JobService/CancelJob", &wire::JobIdRequest { job_id }).await?;
        Ok(r.job.unwrap_or_default().into())
    }

    /// Answers "was this already enqueued, and what became of it?" without
    /// enqueueing anything.
    ///
    /// ```no_run
    /// # async fn demo(client: sepp_rs::client::SeppClient) -> Result<(), sepp_rs::Error> {
    /// let lookup = client.lookup_idempotency_key("emails", "receipt-order-8a3f").await?;
    /// if lookup.found {
    ///     println!("job {} is {}, {} duplicate enqueues so far", lookup.job_id, lookup.state, lookup.hits);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lookup_idempotency_key(&self, queue: &str, key: &str) -> Result<KeyLookup> {
        check_idempotency_key(key, self.lookup_key_limit())?;
        let r: wire::WireLookup =
            self.inner.unary("sepp.v1.JobService/LookupIdempotencyKey", &wire::KeyRequest { queue, idempotency_key: key }).await?;
        Ok(r.into())
    }

    /// Deletes the key's dedup record now, so the next enqueue with it creates
    /// a new job (an operator's tool). It never touches the job.
    pub async fn release_idempotency_key(&self, queue: &str, key: &str) -> Result<KeyRelease> {
        check_idempotency_key(key, self.lookup_key_limit())?;
        let r: wire::WireRelease =
            self.inner.unary("sepp.v1.JobService/ReleaseIdempotencyKey", &wire::KeyRequest { queue, idempotency_key: key }).await?;
        Ok(r.into())
    }

    /// A lookup or release allows at least the 64 hex digits of a key derived
    /// by `dedup_by_content`, as the server does.
    fn lookup_key_limit(&self) -> Option<usize> {
        self.inner.cfg.max_key_bytes.map(|m| m.max(64))
    }

    /// Lists the declared queues and every queue that has jobs, with counts
    /// (an admin call).
    pub async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        let r: wire::WireListQueues = self.inner.unary("sepp.v1.AdminService/ListQueues", &wire::Empty {}).await?;
        Ok(r.queues.into_iter().map(Into::into).collect())
    }

    /// Lists jobs by queue and state, a page at a time, oldest first (an admin
    /// call).
    pub async fn list_jobs(&self, request: &ListJobsRequest) -> Result<JobPage> {
        let r: wire::WireListJobs = self
            .inner
            .unary(
                "sepp.v1.AdminService/ListJobs",
                &wire::WireListJobsRequest {
                    queue: &request.queue,
                    state: request.state.map(JobState::as_proto_name),
                    page_size: request.page_size,
                    page_token: &request.page_token,
                },
            )
            .await?;
        Ok(JobPage { jobs: r.jobs.into_iter().map(Into::into).collect(), next_page_token: r.next_page_token })
    }

    /// Leases up to `max_jobs` jobs from the queues, waiting up to `wait`
    /// for one. This is the raw WorkerService call: there is no worker
    /// runtime in this crate (no background lease extension, no handler
    /// registry); a program that reserves must complete, fail or extend each
    /// job itself before its lease ends.
    pub async fn reserve(&self, request: &ReserveRequest) -> Result<Vec<Reservation>> {
        let body = wire::WireReserveRequest {
            queues: &request.queues,
            worker_id: &request.worker_id,
            max_jobs: request.max_jobs,
            lease_ms: request.lease.map_or(0, ms),
            wait_ms: ms(request.wait),
        };
        let r: wire::WireReserveResponse =
            self.inner.unary_timeout("sepp.v1.WorkerService/Reserve", &body, self.inner.cfg.timeout + request.wait).await?;
        Ok(r.jobs.into_iter().map(Into::into).collect())
    }

    /// Finishes a reserved job, with an optional result, and reports whether
    /// this token had already completed it (a resent call whose first answer
    /// was lost: nothing changed). Any other token that no longer holds the
    /// lease is [`Error::LeaseLost`] and changes nothing.
    ///
    /// A transport error leaves the outcome unknown; the call is resent with
    /// the same token (up to [`ClientBuilder::enqueue_retries`] times), which
    /// the server answers as a repeat if the first one was committed.
    pub async fn complete(&self, job_id: &str, lease_token: &str, result: &[u8]) -> Result<bool> {
        let req = wire::WireCompleteRequest { job_id, lease_token, result };
        let r: wire::WireCompleteResponse = self.inner.resend(|| self.inner.unary("sepp.v1.WorkerService/Complete", &req)).await?;
        Ok(r.already_completed)
    }

    /// Records a failed attempt: the job is retried (by the queue's backoff
    /// or `retry_after`) or, out of attempts or `permanent`, dead-lettered.
    ///
    /// Resent after transport errors like [`complete`](Self::complete); a
    /// repeat reports `already_failed`.
    pub async fn fail(&self, request: &FailRequest) -> Result<FailOutcome> {
        let req = wire::WireFailRequest {
            job_id: &request.job_id,
            lease_token: &request.lease_token,
            error: &request.error,
            retry_after_ms: request.retry_after.map(ms),
            permanent: request.permanent,
        };
        let r: wire::WireFailResponse = self.inner.resend(|| self.inner.unary("sepp.v1.WorkerService/Fail", &req)).await?;
        Ok(r.into())
    }

    /// Keeps a job's lease alive for another `lease` from now, and returns
    /// when it now ends.
    pub async fn extend_lease(&self, job_id: &str, lease_token: &str, lease: Duration) -> Result<Option<SystemTime>> {
        let r: wire::WireLeaseExpiry = self
            .inner
            .unary("sepp.v1.WorkerService/ExtendLease", &wire::WireExtendLeaseRequest { job_id, lease_token, lease_ms: ms(lease) })
            .await?;
        Ok(r.lease_expires_at)
    }

    /// Claims an effect key. Most programs use [`effect`](Self::effect),
    /// which claims, extends, completes and releases for them.
    pub async fn claim_effect(&self, request: &ClaimEffectRequest) -> Result<EffectClaim> {
        crate::effect::check_name("scope", &request.scope)?;
        crate::effect::check_name("key", &request.key)?;
        let body = wire::WireClaimEffectRequest {
            scope: &request.scope,
            key: &request.key,
            ttl_ms: request.ttl.map_or(0, ms),
            lease_ms: request.lease.map_or(0, ms),
            wait_ms: ms(request.wait),
        };
        let r: wire::WireClaim =
            self.inner.unary_timeout("sepp.v1.EffectService/ClaimEffect", &body, self.inner.cfg.timeout + request.wait).await?;
        Ok(r.into())
    }

    /// Stores the effect's result under the claim's token and returns what
    /// the server stored; a later claim of the key replays it. A token that
    /// lost its lease is [`Error::LeaseLost`].
    ///
    /// Resent after transport errors (up to
    /// [`ClientBuilder::enqueue_retries`] times): the server answers a repeat
    /// with the same token with the stored result and `already_completed`.
    pub async fn complete_effect(&self, token: &str, result: &[u8]) -> Result<EffectCompletion> {
        let req = wire::WireCompleteEffectRequest { token, result };
        let r: wire::WireCompleteEffectResponse =
            self.inner.resend(|| self.inner.unary("sepp.v1.EffectService/CompleteEffect", &req)).await?;
        Ok(r.into())
    }

    /// Gives a claim up after a failed effect, so a retry can run it.
    pub async fn release_effect(&self, token: &str) -> Result<()> {
        let _: wire::WireIgnored = self.inner.unary("sepp.v1.EffectService/ReleaseEffect", &wire::TokenRequest { token }).await?;
        Ok(())
    }

    /// Keeps a claim alive for another `lease` from now, and returns when it
    /// now ends.
    pub async fn extend_effect_lease(&self, token: &str, lease: Duration) -> Result<Option<SystemTime>> {
        let r: wire::WireLeaseExpiry = self
            .inner
            .unary("sepp.v1.EffectService/ExtendEffectLease", &wire::WireExtendEffectLeaseRequest { token, lease_ms: ms(lease) })
            .await?;
        Ok(r.lease_expires_at)
    }

    /// Reads an effect key without claiming it.
    pub async fn get_effect(&self, scope: &str, key: &str) -> Result<EffectRecord> {
        let r: wire::WireEffectRecord = self.inner.unary("sepp.v1.EffectService/GetEffect", &wire::ScopeKeyRequest { scope, key }).await?;
        Ok(r.into())
    }

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

pub(crate) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

pub(crate) fn wrong_count(got: usize, want: usize) -> Error {
    Error::from_reason("INTERNAL", "internal", format!("server answered {got} results for a batch of {want} jobs"))
}

pub(crate) fn batch_result(r: wire::WireBatchResult) -> BatchResult {
    match (r.ack, r.error) {
        (_, Some(e)) => Err(Error::from_detail(ErrorDetail {
            reason: e.reason,
            code: e.code,
            message: e.message,
            index: None,
            metadata: e.metadata,
        })),
        (Some(a), None) => Ok(a.into()),
        (None, None) => Err(Error::from_reason("INTERNAL", "internal", "server answered a batch item with neither an ack nor an error")),
    }
}

impl Inner {
    /// Sends one enqueue as its own RPC, resending a keyed one after
    /// transport errors.
    pub(crate) async fn enqueue_direct(&self, body: Bytes, keyed: bool) -> Result<EnqueueAck> {
        let mut attempt = 0;
        loop {
            match self.post("sepp.v1.JobService/Enqueue", body.clone(), self.cfg.timeout).await {
                Ok(b) => {
                    let ack: wire::WireAck = self.decode(&b)?;
                    return Ok(ack.into());
                }
                Err(e) if keyed && e.is_retryable() && attempt < self.cfg.enqueue_retries => {
                    tokio::time::sleep(self.backoff(attempt)).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs `call` again after retryable errors, with the enqueue backoff:
    /// for calls whose repeat the server recognises (Complete, Fail,
    /// CompleteEffect with the same token).
    async fn resend<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut attempt = 0;
        loop {
            match call().await {
                Err(e) if e.is_retryable() && attempt < self.cfg.enqueue_retries => {
                    tokio::time::sleep(self.backoff(attempt)).await;
                    attempt += 1;
                }
                r => return r,
            }
        }
    }

    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let d = Duration::from_millis(25u64 << attempt.min(16));
        d.min(self.cfg.retry_backoff_max)
    }

    async fn unary<Req: Serialize, Resp: DeserializeOwned>(&self, method: &str, req: &Req) -> Result<Resp> {
        self.unary_timeout(method, req, self.cfg.timeout).await
    }

    async fn unary_timeout<Req: Serialize, Resp: DeserializeOwned>(&self, method: &str, req: &Req, timeout: Duration) -> Result<Resp> {
        let body = serde_json::to_vec(req).expect("requests always encode");
        let b = self.post(method, Bytes::from(body), timeout).await?;
        self.decode(&b)
    }

    pub(crate) fn decode<T: DeserializeOwned>(&self, body: &[u8]) -> Result<T> {
        serde_json::from_slice(body).map_err(|e| {
            Error::from_reason("INTERNAL", "internal", format!("the answer of {} is not the JSON this client expects: {e}", self.base))
        })
    }

    /// POSTs one Connect unary call and returns the response body, or the
    /// error the server (or the transport) gave.
    pub(crate) async fn post(&self, method: &str, body: Bytes, timeout: Duration) -> Result<Bytes> {
        let mut rb = self
            .http
            .post(format!("{}/{}", self.base, method))
            .header(CONTENT_TYPE, "application/json")
            .header("Connect-Protocol-Version", "1")
            .header("Connect-Timeout-Ms", ms(timeout).max(1).to_string())
            // The server's deadline answer should arrive before ours cuts in.
            .timeout(timeout + Duration::from_secs(2))
            .body(body);
        if let Some(a) = &self.auth {
            rb = rb.header(AUTHORIZATION, a.clone());
        }
        let resp = rb.send().await.map_err(|e| self.transport(e))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| self.transport(e))?;
        if status.is_success() {
            Ok(bytes)
        } else {
            Err(self.connect_error(status, &bytes))
        }
    }

    fn transport(&self, e: reqwest::Error) -> Error {
        let mut cause = String::new();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            let m = s.to_string();
            if !cause.contains(&m) {
                if !cause.is_empty() {
                    cause.push_str(": ");
                }
                cause.push_str(&m);
            }
            src = s.source();
        }
        if cause.is_empty() {
            cause = e.to_string();
        }
        let message = if e.is_timeout() {
            format!(
                "no answer from the server at {} in time (timeout {:?}); its outcome is unknown: resend with the same idempotency key",
                self.base, self.cfg.timeout
            )
        } else if e.is_connect() {
            format!("cannot reach the server at {}: {cause}; is `sepp serve` running there?", self.base)
        } else {
            format!("the call to {} got no answer: {cause}; its outcome is unknown: resend with the same idempotency key", self.base)
        };
        Error::Transport(TransportError::new(message, e.is_timeout(), Some(Arc::new(e))))
    }

    /// Decodes a Connect error body; falls back on the HTTP status for bodies
    /// that are not one (a proxy's error page).
    fn connect_error(&self, status: reqwest::StatusCode, body: &[u8]) -> Error {
        let parsed: Option<wire::WireError> = serde_json::from_slice(body).ok().filter(|w: &wire::WireError| !w.code.is_empty());
        let w = match parsed {
            Some(w) => w,
            None => {
                let code = match status.as_u16() {
                    400 => "internal",
                    401 => "unauthenticated",
                    403 => "permission_denied",
                    404 => "unimplemented",
                    408 => "deadline_exceeded",
                    429 | 502 | 503 | 504 => "unavailable",
                    _ => "unknown",
                };
                let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
                let mut message = format!("HTTP {status} from {}", self.base);
                if !text.trim().is_empty() {
                    message.push_str(": ");
                    message.push_str(text.trim());
                }
                wire::WireError { code: code.into(), message, details: Vec::new() }
            }
        };
        let mut reason = String::new();
        let mut metadata = Default::default();
        for d in &w.details {
            if d.type_ != "google.rpc.ErrorInfo" {
                continue;
            }
            if let Some((r, md)) = wire::decode_b64(&d.value).and_then(|v| decode_error_info(&v)) {
                reason = r;
                metadata = md;
            } else if let Some(r) = d.debug.as_ref().and_then(|v| v.get("reason")).and_then(|v| v.as_str()) {
                reason = r.to_string();
            }
        }
        if reason.is_empty() {
            reason = match w.code.as_str() {
                "unavailable" | "deadline_exceeded" => "UNAVAILABLE",
                "unauthenticated" => "UNAUTHENTICATED",
                "permission_denied" => "PERMISSION_DENIED",
                "internal" | "unknown" | "data_loss" => "INTERNAL",
                // No Sepp reason (an RPC-layer error such as a JSON field the
                // server does not know): the code, as a reason, in Other.
                code => {
                    return Error::from_detail(ErrorDetail {
                        reason: code.to_ascii_uppercase(),
                        code: w.code.clone(),
                        message: w.message,
                        index: None,
                        metadata,
                    })
                }
            }
            .to_string();
        }
        let index = metadata.get("index").and_then(|i: &String| i.parse().ok());
        Error::from_detail(ErrorDetail { reason, code: w.code, message: w.message, index, metadata })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(normalize_address("http://localhost:50051").unwrap(), "http://localhost:50051");
        assert_eq!(normalize_address("127.0.0.1:50051").unwrap(), "http://127.0.0.1:50051");
        assert_eq!(normalize_address("http://lb:80/sepp/").unwrap(), "http://lb:80/sepp");
        assert_eq!(normalize_address("https://sepp.example").unwrap(), "https://sepp.example");
        assert!(matches!(normalize_address("ftp://x:1"), Err(Error::Config(_))));
        assert!(matches!(normalize_address("http://"), Err(Error::Config(_))));
    }

    #[test]
    fn client_is_send_sync_clone() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<SeppClient>();
        fn check_err<T: Send + Sync + std::error::Error + 'static>() {}
        check_err::<Error>();
    }

    #[test]
    fn https_needs_a_tls_feature() {
        let r = SeppClient::builder("https://sepp.example").build();
        if cfg!(any(feature = "rustls", feature = "native-tls")) {
            assert!(r.is_ok());
        } else {
            let e = r.unwrap_err();
            assert!(e.to_string().contains("rustls"), "{e}");
        }
    }
}
