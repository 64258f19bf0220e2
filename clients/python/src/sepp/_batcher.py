"""Natural batching of concurrent enqueues (internal).

Concurrent ``SeppClient.enqueue`` calls are coalesced into ``EnqueueBatch``
RPCs, in the spirit of the Go client: a call that finds the client idle
(nothing in flight, nothing pending) is sent at once, by its own task, so a
lone caller pays no added delay; calls that arrive while an RPC is in flight
wait in ``pending`` and go together when it returns. Each caller gets its own
ack or error. No timer is involved anywhere.

Up to ``max_in_flight`` RPCs may be in flight, but a further one starts only
once the pending calls number at least half of the last batch, and a sender
that finds only a few calls pending while another is in flight leaves them to
it. Each RPC costs a Python client far more CPU than a Go one (about half a
millisecond in httpx), so a second RPC that carries one or two jobs costs
more than it brings: measured, the Go rule (send whenever a slot is free)
broke 32 callers' enqueues into about two RPCs per three jobs here, this rule
keeps batches near 30.

Everything runs on the event loop's thread, so the state needs no lock.
Sender tasks are started when calls are pending and a slot is free; each
ends as soon as ``pending`` is empty. ``close()`` cancels them and fails the
calls still pending.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set

from .errors import BatchTooLargeError, InternalError, SeppError, UnavailableError, error_for
from .types import Ack

if TYPE_CHECKING:  # pragma: no cover
    from .client import SeppClient


@dataclass
class _Call:
    """One enqueue waiting in the batcher."""

    body: Dict[str, Any]
    keyed: bool
    size: int
    future: "asyncio.Future[Ack]" = field(repr=False)


class Batcher:
    """Coalesces concurrent enqueues of one client into EnqueueBatch RPCs."""

    def __init__(self, client: "SeppClient", max_in_flight: int, max_batch_size: int, max_batch_bytes: int) -> None:
        self._client = client
        self._max_in_flight = max(1, max_in_flight)
        self._max_batch = max(1, max_batch_size)
        self._max_bytes = max(1, max_batch_bytes)
        self._pending: List[_Call] = []
        self._senders = 0
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._closed = False
        # A further RPC starts while others are in flight only once this
        # many calls are pending: half the last batch.
        self._enough = 1

    async def enqueue(self, body: Dict[str, Any], keyed: bool, size: int) -> Ack:
        """Enqueues one job (as Connect JSON) and returns its ack."""
        if self._closed:
            raise UnavailableError("the client is closed")
        if self._senders == 0 and not self._pending:
            # Idle: send this call alone, from the caller's task; hand the
            # slot to a sender task only if calls queued up meanwhile.
            self._senders += 1
            try:
                return await self._client._enqueue_direct(body, keyed)
            finally:
                if self._pending and not self._closed:
                    self._start_sender()
                else:
                    self._senders -= 1
        loop = asyncio.get_running_loop()
        call = _Call(body=body, keyed=keyed, size=size, future=loop.create_future())
        self._pending.append(call)
        if self._senders == 0 or (
            self._senders < self._max_in_flight and len(self._pending) >= self._enough
        ):
            self._senders += 1
            self._start_sender()
        # If the caller is cancelled, the future is cancelled with it and
        # the sender leaves the call out (or ignores its answer). The job may
        # still be enqueued; a keyed retry is harmless.
        return await call.future

    def _start_sender(self) -> None:
        """Starts a sender task (its slot is already counted)."""
        task = asyncio.get_running_loop().create_task(self._send_loop())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_loop(self) -> None:
        """Sends pending calls, batch after batch, until none are left (or
        another sender can take the few that are)."""
        last = 0
        try:
            while True:
                if last > 1:
                    # The callers just answered are about to enqueue again;
                    # let them run first so they join the next batch
                    # instead of following it one by one.
                    await asyncio.sleep(0)
                if self._senders > 1 and len(self._pending) < self._enough:
                    return  # another sender is busy; leave the few to it
                batch = self._take()
                if not batch:
                    return
                await self._send_batch(batch)
                last = len(batch)
                self._enough = max(1, last // 2)
        finally:
            self._senders -= 1

    def _take(self) -> List[_Call]:
        """Removes the next batch from pending, within the size limits,
        leaving out calls whose caller has given up."""
        n, size = 0, 0
        while n < len(self._pending) and n < self._max_batch:
            s = self._pending[n].size
            if n > 0 and size + s > self._max_bytes:
                break
            size += s
            n += 1
        batch = [c for c in self._pending[:n] if not c.future.done()]
        del self._pending[:n]
        return batch

    async def _send_batch(self, batch: List[_Call]) -> None:
        """Sends one batch and answers its calls. Keyed calls whose fate is
        unknown after a transport error are resent with their keys; unkeyed
        ones get the error (unless the request was certainly not sent)."""
        policy = self._client._retry
        attempt = 0
        while batch:
            try:
                await self._rpc(batch)
                return
            except BatchTooLargeError:
                if len(batch) == 1:
                    raise  # cannot happen: a single call goes through Enqueue
                # The server's max_batch_size is below ours: learn it and
                # send the halves.
                half = len(batch) // 2
                self._max_batch = min(self._max_batch, half)
                await self._send_batch(batch[:half])
                await self._send_batch(batch[half:])
                return
            except UnavailableError as err:
                again = []
                for c in batch:
                    if c.future.done():
                        continue
                    if (c.keyed or err.unsent) and attempt < policy.max_retries:
                        again.append(c)
                    else:
                        c.future.set_exception(err)
                if again:
                    await asyncio.sleep(policy.delay(attempt))
                batch = again
                attempt += 1
            except SeppError as err:
                for c in batch:
                    if not c.future.done():
                        c.future.set_exception(err)
                return
            except asyncio.CancelledError:
                for c in batch:
                    if not c.future.done():
                        c.future.set_exception(UnavailableError("the client was closed while the enqueue was in flight"))
                raise
            except Exception as err:  # pragma: no cover - a bug; never leave a caller hanging
                for c in batch:
                    if not c.future.done():
                        c.future.set_exception(err)
                return

    async def _rpc(self, batch: List[_Call]) -> None:
        """Sends batch as one RPC and answers every call; raises
        UnavailableError (nothing answered) or BatchTooLargeError."""
        if len(batch) == 1:
            call = batch[0]
            data = await self._client._rpc("sepp.v1.JobService/Enqueue", call.body)
            if not call.future.done():
                call.future.set_result(Ack.from_json(data))
            return
        data = await self._client._rpc(
            "sepp.v1.JobService/EnqueueBatch", {"jobs": [c.body for c in batch]}
        )
        results = data.get("results") or []
        if len(results) != len(batch):
            raise InternalError(
                f"server answered a batch of {len(batch)} jobs with {len(results)} results"
            )
        for call, r in zip(batch, results):
            if call.future.done():
                continue
            e = r.get("error")
            if e is not None:
                call.future.set_exception(
                    error_for(str(e.get("code", "")), e.get("reason"), str(e.get("message", "")), e.get("metadata"))
                )
            else:
                call.future.set_result(Ack.from_json(r.get("ack") or {}))

    async def close(self) -> None:
        """Stops the senders and fails the calls still pending."""
        self._closed = True
        for c in self._pending:
            if not c.future.done():
                c.future.set_exception(UnavailableError("the client was closed before the enqueue was sent"))
        self._pending.clear()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def json_size(body: Dict[str, Any]) -> int:
    """A cheap estimate of a job's share of a batch: its payload's size."""
    payload: Optional[str] = body.get("payload")
    return len(payload) * 3 // 4 if payload else 0

