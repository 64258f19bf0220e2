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

The batcher knows nothing of the client: it is handed a :data:`Send`
function that makes one RPC of a list of jobs, and the number of resends
the retry policy allows (their waits are :func:`sepp.retry.delay`'s).

Everything runs on the event loop's thread, so the state needs no lock.
Sender tasks are started when calls are pending and a slot is free; each
ends as soon as ``pending`` is empty. A call that finds the client idle is
sent by its caller's task instead. ``close()`` cancels the sender tasks and
fails the calls still pending.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Awaitable, Callable, List, Sequence, Set, Union

from . import retry
from .errors import BatchTooLargeError, SeppError, UnavailableError
from .types import Ack
from .v1 import job_pb2

#: Sends jobs in one RPC (``Enqueue`` for one, ``EnqueueBatch`` for more)
#: and returns one ack or error per job, in order. It raises what failed the
#: whole RPC: :class:`~sepp.UnavailableError` when its outcome is unknown,
#: :class:`~sepp.BatchTooLargeError` when the server takes fewer jobs per
#: batch, or the one error of a single job's Enqueue.
Send = Callable[[Sequence[job_pb2.EnqueueRequest]], Awaitable[List[Union[Ack, SeppError]]]]


@dataclass
class _Call:
    """One enqueue waiting in the batcher."""

    request: job_pb2.EnqueueRequest
    keyed: bool
    size: int
    future: "asyncio.Future[Ack]" = field(repr=False)


class Batcher:
    """Coalesces concurrent enqueues of one client into EnqueueBatch RPCs."""

    def __init__(self, send: Send, retries: int, max_in_flight: int, max_batch_size: int, max_batch_bytes: int) -> None:
        self._send = send
        self._retries = retries
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

    async def enqueue(self, request: job_pb2.EnqueueRequest, keyed: bool) -> Ack:
        """Enqueues one job and returns its ack."""
        if self._closed:
            raise UnavailableError("the client is closed")
        loop = asyncio.get_running_loop()
        call = _Call(request=request, keyed=keyed, size=len(request.payload), future=loop.create_future())
        if self._senders == 0 and not self._pending:
            # Idle: send this call alone, from the caller's task; hand the
            # slot to a sender task only if calls queued up meanwhile.
            self._senders += 1
            try:
                await self._send_batch([call])
            except asyncio.CancelledError:
                # The caller gave up: _send_batch failed its call, and no
                # one else awaits it, so take its error here lest asyncio
                # log it as never retrieved.
                if call.future.done() and not call.future.cancelled():
                    call.future.exception()
                raise
            finally:
                if self._pending and not self._closed:
                    self._start_sender()
                else:
                    self._senders -= 1
            return call.future.result()
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
        ones get the error, since a resend could enqueue them twice."""
        attempt = 0
        while batch:
            try:
                self._answer(batch, await self._send([c.request for c in batch]))
                return
            except BatchTooLargeError as err:
                if len(batch) == 1:
                    # Not from a batch of ours: a single job goes through
                    # Enqueue. Nothing to split.
                    self._fail(batch, err)
                    return
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
                    if c.keyed and attempt < self._retries and not self._closed:
                        again.append(c)
                    else:
                        c.future.set_exception(err)
                if again:
                    await asyncio.sleep(retry.jittered_delay(attempt))
                batch = again
                attempt += 1
            except SeppError as err:
                self._fail(batch, err)
                return
            except asyncio.CancelledError:
                self._fail(batch, UnavailableError("the enqueue was cancelled while in flight: its outcome is unknown"))
                raise
            except Exception as err:  # pragma: no cover - a bug; never leave a caller hanging
                self._fail(batch, err)
                return

    @staticmethod
    def _fail(batch: List[_Call], err: BaseException) -> None:
        """Fails every call of batch still waiting with err."""
        for c in batch:
            if not c.future.done():
                c.future.set_exception(err)

    @staticmethod
    def _answer(batch: List[_Call], results: List[Union[Ack, SeppError]]) -> None:
        """Hands each call its ack or error (a caller that gave up gets
        nothing)."""
        for call, r in zip(batch, results):
            if call.future.done():
                continue
            if isinstance(r, SeppError):
                call.future.set_exception(r)
            else:
                call.future.set_result(r)

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


