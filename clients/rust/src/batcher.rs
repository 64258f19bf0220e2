//! Natural batching of concurrent enqueues into `EnqueueBatch` RPCs.
//!
//! At most `max_in_flight` RPCs are in flight. A call that finds a free slot
//! and nobody waiting sends at once, from its own task, as a plain `Enqueue`:
//! a lone caller pays no added delay. Calls that arrive while every slot is
//! busy wait in `pending` and go together, as one `EnqueueBatch`, when a slot
//! frees up. A sender task is spawned when calls are pending and a slot is
//! free; it drains `pending` one RPC at a time and ends when `pending` is
//! empty, so no task outlives the work.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::client::{batch_result, wrong_count, Inner};
use crate::error::{Error, Result};
use crate::request::EnqueueAck;
use crate::wire;

pub(crate) struct Batcher {
    state: Mutex<State>,
    /// The configured max batch size, lowered when the server's
    /// `max_batch_size` turns out smaller.
    max_batch: AtomicUsize,
}

struct State {
    pending: VecDeque<Call>,
    /// Slots in use: direct sends plus sender tasks.
    senders: usize,
}

/// One enqueue waiting in the batcher.
struct Call {
    body: Bytes,
    keyed: bool,
    payload_len: usize,
    tx: oneshot::Sender<Result<EnqueueAck>>,
}

impl Batcher {
    pub(crate) fn new(max_batch: usize) -> Self {
        Batcher { state: Mutex::new(State { pending: VecDeque::new(), senders: 0 }), max_batch: AtomicUsize::new(max_batch) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State inconsistent
        // (every change is one push, pop or counter step), so go on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Holds a slot for a direct send; on drop (the send finished, or the caller
/// gave up and dropped its future) hands it to a sender task if calls queued
/// up meanwhile, or frees it.
struct Slot {
    inner: Arc<Inner>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let b = self.inner.batcher.as_ref().expect("batching is on");
        let mut st = b.lock();
        if !st.pending.is_empty() {
            if let Ok(h) = tokio::runtime::Handle::try_current() {
                drop(st);
                h.spawn(Inner::run_sender(self.inner.clone()));
                return;
            }
        }
        st.senders -= 1;
    }
}

impl Inner {
    pub(crate) async fn enqueue_batched(self: &Arc<Self>, body: Bytes, keyed: bool, payload_len: usize) -> Result<EnqueueAck> {
        let b = self.batcher.as_ref().expect("batching is on");
        // The lock is held in this block only, never across an await.
        let (rx, start) = {
            let mut st = b.lock();
            if st.senders < self.cfg.max_in_flight && st.pending.is_empty() {
                st.senders += 1;
                (None, false)
            } else {
                let (tx, rx) = oneshot::channel();
                st.pending.push_back(Call { body: body.clone(), keyed, payload_len, tx });
                let start = st.senders < self.cfg.max_in_flight;
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
                let _slot = Slot { inner: self.clone() };
                return self.enqueue_direct(body, keyed).await;
            }
        };
        if start {
            tokio::spawn(Inner::run_sender(self.clone()));
        }
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(Error::from_reason(
                "INTERNAL",
                "internal",
                "the client's batch sender stopped before answering (is the runtime shutting down?)",
            )),
        }
    }

    /// Drains `pending`, one RPC at a time, then frees its slot.
    async fn run_sender(self: Arc<Self>) {
        let b = self.batcher.as_ref().expect("batching is on");
        let mut last = 0;
        loop {
            if last > 1 {
                // The callers just answered are about to enqueue again; let
                // them run first so they join the next batch instead of
                // trickling in behind it.
                tokio::task::yield_now().await;
            }
            let batch = {
                let mut st = b.lock();
                let batch = self.take(b, &mut st);
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
    fn take(&self, b: &Batcher, st: &mut State) -> Vec<Call> {
        let max = b.max_batch.load(Ordering::Relaxed).max(1);
        let mut batch = Vec::new();
        let mut bytes = 0;
        while let Some(c) = st.pending.front() {
            if batch.len() >= max || (!batch.is_empty() && bytes + c.payload_len > self.cfg.max_batch_bytes) {
                break;
            }
            let c = st.pending.pop_front().expect("front exists");
            if c.tx.is_closed() {
                continue;
            }
            bytes += c.payload_len;
            batch.push(c);
        }
        batch
    }

    /// Sends one batch and answers its calls. Keyed calls whose fate is
    /// unknown after a transport error are resent with their keys; unkeyed
    /// ones get the error, since resending them could create duplicates.
    async fn send_batch(&self, batch: Vec<Call>) {
        let b = self.batcher.as_ref().expect("batching is on");
        // Halves of a batch the server found too large wait here.
        let mut work = vec![batch];
        while let Some(mut batch) = work.pop() {
            let mut attempt = 0;
            while !batch.is_empty() {
                let err = match self.rpc(&batch).await {
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
                    b.max_batch.fetch_min(half, Ordering::Relaxed);
                    let second = batch.split_off(half);
                    work.push(second);
                    work.push(batch);
                    break;
                }
                let retry = err.is_retryable() && attempt < self.cfg.enqueue_retries;
                let mut again = Vec::new();
                for c in batch.drain(..) {
                    if retry && c.keyed && !c.tx.is_closed() {
                        again.push(c);
                    } else {
                        let _ = c.tx.send(Err(err.clone()));
                    }
                }
                if !again.is_empty() {
                    tokio::time::sleep(self.backoff(attempt)).await;
                    attempt += 1;
                }
                batch = again;
            }
        }
    }

    /// Sends `batch` as one RPC: an `Enqueue` for one call, an `EnqueueBatch`
    /// for more. `Err` is a failure of the whole RPC (the calls are not
    /// answered yet); `Ok` has one result per call.
    async fn rpc(&self, batch: &[Call]) -> Result<Vec<Result<EnqueueAck>>> {
        if batch.len() == 1 {
            let b = self.post("sepp.v1.JobService/Enqueue", batch[0].body.clone(), self.cfg.timeout).await?;
            let ack: wire::WireAck = self.decode(&b)?;
            return Ok(vec![Ok(ack.into())]);
        }
        let body = wire::encode_batch(batch.iter().map(|c| c.body.as_ref()), false);
        let b = self.post("sepp.v1.JobService/EnqueueBatch", Bytes::from(body), self.cfg.timeout).await?;
        let res: wire::WireBatchResponse = self.decode(&b)?;
        if res.results.len() != batch.len() {
            return Err(wrong_count(res.results.len(), batch.len()));
        }
        Ok(res.results.into_iter().map(batch_result).collect())
    }
}
