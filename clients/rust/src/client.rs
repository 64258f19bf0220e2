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
//!
//! The client sits on two layers that know nothing of it: the transport
//! (one Connect call over HTTP) and the batcher, which is handed a function
//! that sends enqueues through the transport. The effect helper
//! ([`crate::effect`]) sits on top of the client.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderValue;

use crate::batcher::{Batcher, Limits, SendFn};
use crate::convert::batch_result;
use crate::error::{Error, Result};
use crate::pb::health::{health_check_response::ServingStatus, HealthCheckRequest, HealthCheckResponse};
use crate::pb::sepp_v1 as pb;
use crate::pb::sepp_v1::Reason;
use crate::request::{check_idempotency_key, BatchResult, EnqueueAck, EnqueueRequest, DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES};
use crate::retry;
use crate::transport::{ms, Transport};
use crate::types::*;

/// A client of one Sepp server (or of a load balancer in front of several),
/// speaking the Connect protocol, binary protobuf messages over HTTP.
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
    inner: Arc<Inner>,
}

impl fmt::Debug for SeppClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeppClient").field("address", &self.inner.transport.base).field("config", &self.inner.cfg).finish()
    }
}

struct Inner {
    transport: Arc<Transport>,
    cfg: Config,
    batcher: Option<Batcher<pb::EnqueueRequest, EnqueueAck>>,
}

#[derive(Debug, Clone)]
struct Config {
    timeout: Duration,
    enqueue_retries: u32,
    batching: bool,
    max_in_flight: usize,
    max_batch_size: usize,
    max_batch_bytes: usize,
    max_key_bytes: Option<usize>,
    wait_for_server: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            timeout: Duration::from_secs(30),
            enqueue_retries: retry::DEFAULT_RETRIES,
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
    /// `UNAVAILABLE`, each resend after the shared policy's full-jitter delay
    /// ([`retry::delay`]: up to 50 ms doubling to 2 s).
    /// Unkeyed enqueues are never resent: a resend could create a duplicate.
    /// Default 5 ([`retry::DEFAULT_RETRIES`]); 0 turns retries off.
    pub fn enqueue_retries(mut self, retries: u32) -> Self {
        self.cfg.enqueue_retries = retries;
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
        let transport = Arc::new(Transport { http, base, auth, timeout: self.cfg.timeout });
        let batcher = if self.cfg.batching {
            let limits = Limits {
                max_in_flight: self.cfg.max_in_flight,
                max_batch_size: self.cfg.max_batch_size,
                max_batch_bytes: self.cfg.max_batch_bytes,
                retries: self.cfg.enqueue_retries,
            };
            Some(Batcher::new(limits, enqueue_sender(transport.clone())))
        } else {
            None
        };
        Ok(SeppClient { inner: Arc::new(Inner { transport, cfg: self.cfg, batcher }) })
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
                        log::info!("sepp: server is up at {} after {attempt} tries", client.address());
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
        &self.inner.transport.base
    }

    fn transport(&self) -> &Transport {
        &self.inner.transport
    }

    /// Checks that the server answers and says SERVING (the Connect form of
    /// `grpc.health.v1.Health/Check`).
    pub async fn health(&self) -> Result<()> {
        let h: HealthCheckResponse = self.transport().unary("grpc.health.v1.Health/Check", &HealthCheckRequest::default()).await?;
        if h.status == ServingStatus::Serving as i32 {
            Ok(())
        } else {
            let status = ServingStatus::from_i32(h.status).map_or_else(|| h.status.to_string(), |s| s.as_str_name().to_string());
            Err(Error::new(
                Reason::Unavailable,
                "unavailable",
                format!("the server at {} says {status}: its store cannot be read; retry later or use another node", self.address()),
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
        let job = request.to_proto();
        match &self.inner.batcher {
            Some(b) => b.submit(job, keyed, request.payload.len()).await,
            None => {
                let retries = if keyed { self.inner.cfg.enqueue_retries } else { 0 };
                let ack: pb::EnqueueResponse = retry::resend(retries, || self.transport().unary(ENQUEUE, &job)).await?;
                Ok(ack.into())
            }
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
        let mut jobs = Vec::with_capacity(requests.len());
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
            jobs.push(r.to_proto());
            index.push(i);
        }
        if !jobs.is_empty() {
            let req = pb::EnqueueBatchRequest { jobs, atomic };
            let retries = if all_keyed { self.inner.cfg.enqueue_retries } else { 0 };
            let res: pb::EnqueueBatchResponse = retry::resend(retries, || self.transport().unary(ENQUEUE_BATCH, &req)).await?;
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
        let req = pb::GetJobRequest { job_id: job_id.into() };
        let r: pb::GetJobResponse = self.transport().unary("sepp.v1.JobService/GetJob", &req).await?;
        Ok(r.job.unwrap_or_default().into())
    }

    /// Cancels a job that has not finished and returns it; a finished job is
    /// returned unchanged.
    pub async fn cancel_job(&self, job_id: &str) -> Result<Job> {
        let req = pb::CancelJobRequest { job_id: job_id.into() };
        let r: pb::CancelJobResponse = self.transport().unary("sepp.v1.JobService/CancelJob", &req).await?;
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
        self.lookup(pb::LookupIdempotencyKeyRequest { queue: queue.into(), idempotency_key: key.into(), payload: Vec::new() }).await
    }

    /// [`lookup_idempotency_key`](Self::lookup_idempotency_key) for the key a
    /// queue with `key_fields` derives from `payload`: the server derives it
    /// as an enqueue of `payload` would, and [`KeyLookup::idempotency_key`]
    /// says which it was. A queue without `key_fields` refuses a payload
    /// ([`Error::InvalidField`]), as does a payload its fields are not in.
    ///
    /// ```no_run
    /// # async fn demo(client: sepp_rs::client::SeppClient) -> Result<(), sepp_rs::Error> {
    /// // payments has key_fields = ["/account", "/amount"].
    /// let lookup = client.lookup_idempotency_key_by_payload("payments", br#"{"account":"acc-123","amount":100}"#).await?;
    /// println!("key {} found={}", lookup.idempotency_key, lookup.found); // key ["acc-123",100]
    /// # Ok(()) }
    /// ```
    pub async fn lookup_idempotency_key_by_payload(&self, queue: &str, payload: &[u8]) -> Result<KeyLookup> {
        check_key_payload(payload)?;
        self.lookup(pb::LookupIdempotencyKeyRequest { queue: queue.into(), idempotency_key: String::new(), payload: payload.to_vec() })
            .await
    }

    async fn lookup(&self, req: pb::LookupIdempotencyKeyRequest) -> Result<KeyLookup> {
        let r: pb::LookupIdempotencyKeyResponse = self.transport().unary("sepp.v1.JobService/LookupIdempotencyKey", &req).await?;
        Ok(r.into())
    }

    /// Deletes the key's dedup record now, so the next enqueue with it creates
    /// a new job (an operator's tool). It never touches the job.
    pub async fn release_idempotency_key(&self, queue: &str, key: &str) -> Result<KeyRelease> {
        check_idempotency_key(key, self.lookup_key_limit())?;
        self.release(pb::ReleaseIdempotencyKeyRequest { queue: queue.into(), idempotency_key: key.into(), payload: Vec::new() }).await
    }

    /// [`release_idempotency_key`](Self::release_idempotency_key) for the key
    /// a queue with `key_fields` derives from `payload`, derived by the
    /// server; [`KeyRelease::idempotency_key`] says which it was.
    pub async fn release_idempotency_key_by_payload(&self, queue: &str, payload: &[u8]) -> Result<KeyRelease> {
        check_key_payload(payload)?;
        self.release(pb::ReleaseIdempotencyKeyRequest { queue: queue.into(), idempotency_key: String::new(), payload: payload.to_vec() })
            .await
    }

    async fn release(&self, req: pb::ReleaseIdempotencyKeyRequest) -> Result<KeyRelease> {
        let r: pb::ReleaseIdempotencyKeyResponse = self.transport().unary("sepp.v1.JobService/ReleaseIdempotencyKey", &req).await?;
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
        let r: pb::ListQueuesResponse = self.transport().unary("sepp.v1.AdminService/ListQueues", &pb::ListQueuesRequest {}).await?;
        Ok(r.queues.into_iter().map(Into::into).collect())
    }

    /// Lists jobs by queue and state, a page at a time, oldest first (an admin
    /// call).
    pub async fn list_jobs(&self, request: &ListJobsRequest) -> Result<JobPage> {
        let r: pb::ListJobsResponse = self.transport().unary("sepp.v1.AdminService/ListJobs", &request.to_proto()).await?;
        Ok(r.into())
    }

    /// Leases up to `max_jobs` jobs from the queues, waiting up to `wait`
    /// for one. This is the raw WorkerService call: there is no worker
    /// runtime in this crate (no background lease extension, no handler
    /// registry); a program that reserves must complete, fail or extend each
    /// job itself before its lease ends.
    pub async fn reserve(&self, request: &ReserveRequest) -> Result<Vec<Reservation>> {
        let timeout = self.inner.cfg.timeout + request.wait;
        let r: pb::ReserveResponse = self.transport().unary_timeout("sepp.v1.WorkerService/Reserve", &request.to_proto(), timeout).await?;
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
        let req = pb::CompleteRequest { job_id: job_id.into(), lease_token: lease_token.into(), result: result.to_vec() };
        let r: pb::CompleteResponse = self.resend(|| self.transport().unary("sepp.v1.WorkerService/Complete", &req)).await?;
        Ok(r.already_completed)
    }

    /// Records a failed attempt: the job is retried (by the queue's backoff
    /// or `retry_after`) or, out of attempts or `permanent`, dead-lettered.
    ///
    /// Resent after transport errors like [`complete`](Self::complete); a
    /// repeat reports `already_failed`.
    pub async fn fail(&self, request: &FailRequest) -> Result<FailOutcome> {
        let req = request.to_proto();
        let r: pb::FailResponse = self.resend(|| self.transport().unary("sepp.v1.WorkerService/Fail", &req)).await?;
        Ok(r.into())
    }

    /// Keeps a job's lease alive for another `lease` from now, and returns
    /// when it now ends.
    pub async fn extend_lease(&self, job_id: &str, lease_token: &str, lease: Duration) -> Result<Option<SystemTime>> {
        let req = pb::ExtendLeaseRequest { job_id: job_id.into(), lease_token: lease_token.into(), lease_ms: ms(lease) };
        let r: pb::ExtendLeaseResponse = self.transport().unary("sepp.v1.WorkerService/ExtendLease", &req).await?;
        Ok(r.lease_expires_at.and_then(|t| SystemTime::try_from(t).ok()))
    }

    /// Claims an effect key. Most programs use [`effect`](Self::effect),
    /// which claims, extends, completes and releases for them.
    pub async fn claim_effect(&self, request: &ClaimEffectRequest) -> Result<EffectClaim> {
        check_effect_name("scope", &request.scope)?;
        check_effect_name("key", &request.key)?;
        let timeout = self.inner.cfg.timeout + request.wait;
        let r: pb::ClaimEffectResponse =
            self.transport().unary_timeout("sepp.v1.EffectService/ClaimEffect", &request.to_proto(), timeout).await?;
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
        let req = pb::CompleteEffectRequest { token: token.into(), result: result.to_vec() };
        let r: pb::CompleteEffectResponse = self.resend(|| self.transport().unary("sepp.v1.EffectService/CompleteEffect", &req)).await?;
        Ok(r.into())
    }

    /// Gives a claim up after a failed effect, so a retry can run it.
    pub async fn release_effect(&self, token: &str) -> Result<()> {
        let req = pb::ReleaseEffectRequest { token: token.into() };
        let _: pb::ReleaseEffectResponse = self.transport().unary("sepp.v1.EffectService/ReleaseEffect", &req).await?;
        Ok(())
    }

    /// Keeps a claim alive for another `lease` from now, and returns when it
    /// now ends.
    pub async fn extend_effect_lease(&self, token: &str, lease: Duration) -> Result<Option<SystemTime>> {
        let req = pb::ExtendEffectLeaseRequest { token: token.into(), lease_ms: ms(lease) };
        let r: pb::ExtendEffectLeaseResponse = self.transport().unary("sepp.v1.EffectService/ExtendEffectLease", &req).await?;
        Ok(r.lease_expires_at.and_then(|t| SystemTime::try_from(t).ok()))
    }

    /// Reads an effect key without claiming it.
    pub async fn get_effect(&self, scope: &str, key: &str) -> Result<EffectRecord> {
        let req = pb::GetEffectRequest { scope: scope.into(), key: key.into() };
        let r: pb::GetEffectResponse = self.transport().unary("sepp.v1.EffectService/GetEffect", &req).await?;
        Ok(r.into())
    }

    /// Runs `call` again after retryable errors, by the shared retry policy:
    /// for calls whose repeat the server recognises (Complete, Fail,
    /// CompleteEffect with the same token).
    async fn resend<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        retry::resend(self.inner.cfg.enqueue_retries, call).await
    }
}

const ENQUEUE: &str = "sepp.v1.JobService/Enqueue";
const ENQUEUE_BATCH: &str = "sepp.v1.JobService/EnqueueBatch";

/// An empty payload derives no key: the server would take the request for
/// one with an empty key, and say that instead.
fn check_key_payload(payload: &[u8]) -> Result<()> {
    if payload.is_empty() {
        return Err(Error::invalid_field(
            "payload",
            "is empty: give the payload an enqueue would send, for the queue's key_fields to derive the key from",
        ));
    }
    Ok(())
}

fn wrong_count(got: usize, want: usize) -> Error {
    Error::new(Reason::Internal, "internal", format!("server answered {got} results for a batch of {want} jobs"))
}

/// The batcher's send function for enqueues: one job as an `Enqueue`, more
/// as a non-atomic `EnqueueBatch`, each job judged alone.
fn enqueue_sender(transport: Arc<Transport>) -> SendFn<pb::EnqueueRequest, EnqueueAck> {
    Arc::new(move |jobs| {
        let transport = transport.clone();
        Box::pin(async move { send_enqueues(&transport, jobs).await })
    })
}

async fn send_enqueues(transport: &Transport, mut jobs: Vec<pb::EnqueueRequest>) -> Result<Vec<BatchResult>> {
    let want = jobs.len();
    if want == 1 {
        let ack: pb::EnqueueResponse = transport.unary(ENQUEUE, &jobs.pop().expect("one job")).await?;
        return Ok(vec![Ok(ack.into())]);
    }
    let res: pb::EnqueueBatchResponse = transport.unary(ENQUEUE_BATCH, &pb::EnqueueBatchRequest { jobs, atomic: false }).await?;
    if res.results.len() != want {
        return Err(wrong_count(res.results.len(), want));
    }
    Ok(res.results.into_iter().map(batch_result).collect())
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
