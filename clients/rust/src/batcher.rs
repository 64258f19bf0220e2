//! Natural batching of concurrent calls into one RPC each time.
//!
//! At most `max_in_flight` RPCs are in flight. A call that finds a free slot
//! and nobody waiting sends at once, from its own task, alone: a lone caller
//! pays no added delay. Calls that arrive while every slot is busy wait in
//! `pending` and go together, as one RPC, when a slot frees up. A sender task
//! is spawned when calls are pending and a slot is free; it drains `pending`
//! one RPC at a time and ends when `pending` is empty, so no task outlives
//! the work.
//!
//! The batcher knows nothing of the client: it is handed the function that
//! sends a batch (for enqueues, an `Enqueue` for one job and an
//! `EnqueueBatch` for more), and answers each caller from its result. That
//! function holds the transport, not the client, so a batcher owned by a
//! client does not keep it alive.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::pb::sepp_v1::Reason;
use crate::retry;

/// What a [`SendFn`] returns: `Err` when the whole RPC failed (no call is
/// answered yet), else one result per call, in order.
pub(crate) type SendFuture<R> = Pin<Box<dyn Future<Output = Result<Vec<Result<R>>>> + Send>>;

/// Sends a batch of calls as one RPC.
pub(crate) type SendFn<T, R> = Arc<dyn Fn(Vec<T>) -> SendFuture<R> + Send + Sync>;

/// How much goes out at once, and how often a call is resent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// RPCs in flight at once (direct sends plus sender tasks).
    pub max_in_flight: usize,
    /// Calls in one RPC, lowered when the server finds a batch too large.
    pub max_batch_size: usize,
    /// The sizes (payload bytes) of the calls in one RPC.
    pub max_batch_bytes: usize,
    /// Resends of a keyed call whose outcome is unknown.
    pub retries: u32,
}

/// Coalesces concurrent calls of `T` (answered with `R`) into batches.
pub(crate) struct Batcher<T, R> {
    shared: Arc<Shared<T, R>>,
}

struct Shared<T, R> {
    state: Mutex<State<T, R>>,
    /// The configured max batch size, lowered when the server's
    /// `max_batch_size` turns out smaller.
    max_batch: AtomicUsize,
    limits: Limits,
    send: SendFn<T, R>,
}

struct State<T, R> {
    pending: VecDeque<Call<T, R>>,
    /// Slots in use: direct sends plus sender tasks.
    senders: usize,
}

/// One call waiting in the batcher.
struct Call<T, R> {
    item: T,
    keyed: bool,
    size: usize,
    tx: oneshot::Sender<Result<R>>,
}

impl<T: Clone + Send + 'static, R: Send + 'static> Batcher<T, R> {
    pub(crate) fn new(limits: Limits, send: SendFn<T, R>) -> Self {
        let shared = Shared {
            state: Mutex::new(State { pending: VecDeque::new(), senders: 0 }),
            max_batch: AtomicUsize::new(limits.max_batch_size.max(1)),
            limits,
            send,
        };
        Batcher { shared: Arc::new(shared) }
    }

    /// Sends `item` alone or with others and returns its own answer. A
    /// `keyed` call (safe to repeat) is resent while its outcome is unknown;
    /// `size` counts against `max_batch_bytes`.
    pub(crate) async fn submit(&self, item: T, keyed: bool, size: usize) -> Result<R> {
        let shared = &self.shared;
        // Moved into the queue, or sent from here.
        let mut item = Some(item);
        // The lock is held in this block only, never across an await.
        let (rx, start) = {
            let mut st = shared.lock();
            if st.senders < shared.limits.max_in_flight && st.pending.is_empty() {
                st.senders += 1;
                (None, false)
            } else {
                let (tx, rx) = oneshot::channel();
                st.pending.push_back(Call { item: item.take().expect("not queued yet"), keyed, size, tx });
                let start = st.senders < shared.limits.max_in_flight;
                if start {
                    st.senders += 1;
                }
                (Some(rx), start)
            }
        };
        let rx = match rx {
            Some(rx) => rx,
            None => {
                // Idle: send this call alone, from the caller's task.
                let _slot = Slot { shared: shared.clone() };
                return shared.send_alone(item.take().expect("not queued"), keyed).await;
            }
        };
        if start {
            tokio::spawn(shared.clone().run_sender());
        }
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(Error::new(
                Reason::Internal,
                "internal",
                "the client's batch sender stopped before answering (is the runtime shutting down?)",
            )),
        }
    }
}

/// Holds a slot for a direct send; on drop (the send finished, or the caller
/// gave up and dropped its future) hands it to a sender task if calls queued
/// up meanwhile, or frees it.
struct Slot<T: Clone + Send + 'static, R: Send + 'static> {
    shared: Arc<Shared<T, R>>,
}

impl<T: Clone + Send + 'static, R: Send + 'static> Drop for Slot<T, R> {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        if !st.pending.is_empty() {
            if let Ok(h) = tokio::runtime::Handle::try_current() {
                drop(st);
                h.spawn(self.shared.clone().run_sender());
                return;
            }
        }
        st.senders -= 1;
    }
}

impl<T: Clone + Send + 'static, R: Send + 'static> Shared<T, R> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State<T, R>> {
        // A panic while holding the lock cannot leave State inconsistent
        // (every change is one push, pop or counter step), so go on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends one call as its own RPC, resending a keyed one while its
    /// outcome is unknown.
    async fn send_alone(&self, item: T, keyed: bool) -> Result<R> {
        let retries = if keyed { self.limits.retries } else { 0 };
        let mut results = retry::resend(retries, || (self.send)(vec![item.clone()])).await?;
        match results.pop() {
            Some(r) if results.is_empty() => r,
            _ => Err(Error::new(Reason::Internal, "internal", "the server answered one call with another number of results")),
        }
    }

    /// Drains `pending`, one RPC at a time, then frees its slot.
    async fn run_sender(self: Arc<Self>) {
        let mut last = 0;
        loop {
            if last > 1 {
                // The callers just answered are about to call again; let
                // them run first so they join the next batch instead of
                // trickling in behind it.
                tokio::task::yield_now().await;
            }
            let batch = {
                let mut st = self.lock();
                let batch = self.take(&mut st);
                if batch.is_empty() {
                    st.senders -= 1;
                    return;
                }
                batch
            };
            last = batch.len();
            self.send_batch(batch).await;
        }
    }

    /// Removes the next batch from `pending`, within the size limits; calls
    /// whose caller gave up are dropped.
    fn take(&self, st: &mut State<T, R>) -> Vec<Call<T, R>> {
        let max = self.max_batch.load(Ordering::Relaxed).max(1);
        let mut batch = Vec::new();
        let mut bytes = 0;
        while let Some(c) = st.pending.front() {
            if batch.len() >= max || (!batch.is_empty() && bytes + c.size > self.limits.max_batch_bytes) {
                break;
            }
            let c = st.pending.pop_front().expect("front exists");
            if c.tx.is_closed() {
                continue;
            }
            bytes += c.size;
            batch.push(c);
        }
        batch
    }

    /// Sends one batch and answers its calls. Keyed calls whose fate is
    /// unknown after a transport error are resent; unkeyed ones get the
    /// error, since resending them could create duplicates.
    async fn send_batch(&self, batch: Vec<Call<T, R>>) {
        // Halves of a batch the server found too large wait here.
        let mut work = vec![batch];
        while let Some(mut batch) = work.pop() {
            let mut retry = 0;
            while !batch.is_empty() {
                let items = batch.iter().map(|c| c.item.clone()).collect();
                let err = match (self.send)(items).await {
                    Ok(results) => {
                        for (c, r) in batch.drain(..).zip(results) {
                            let _ = c.tx.send(r);
                        }
                        break;
                    }
                    Err(e) => e,
                };
                if matches!(err, Error::BatchTooLarge(_)) && batch.len() > 1 {
                    let half = batch.len() / 2;
                    self.max_batch.fetch_min(half, Ordering::Relaxed);
                    let second = batch.split_off(half);
                    work.push(second);
                    work.push(batch);
                    break;
                }
                let resend = err.is_retryable() && retry < self.limits.retries;
                let mut again = Vec::new();
                for c in batch.drain(..) {
                    if resend && c.keyed && !c.tx.is_closed() {
                        again.push(c);
                    } else {
                        let _ = c.tx.send(Err(err.clone()));
                    }
                }
                if !again.is_empty() {
                    tokio::time::sleep(retry::jittered_delay(retry)).await;
                    retry += 1;
                }
                batch = again;
            }
        }
    }
}
