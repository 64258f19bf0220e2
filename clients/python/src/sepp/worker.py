"""The worker runtime: reserve jobs, run handlers, keep leases, report outcomes.

::

    worker = Worker(client, queues=["emails"], concurrency=16)

    @worker.handler("receipt")
    async def send_receipt(job: DeliveredJob) -> bytes | None:
        return await mailer.send(job.payload)

    await worker.run_until_signal()      # SIGTERM / SIGINT: graceful shutdown

Delivery is at least once: a job whose worker dies, or whose lease expires,
is delivered again. Make handlers idempotent: guard each external effect
with :func:`sepp.effect.do`.

A handler's return value (bytes, str or None) is stored as the job's result.
An exception retries the job with the queue's backoff; raise
:class:`PermanentError` to dead-letter it at once, or :class:`RetryAfterError`
to retry it after a delay of your choosing. An
:class:`~sepp.EffectInProgressError` (from ``effect.do(..., mode="raise")``)
retries it after one second.

Shutdown (``stop()``, leaving ``async with``, or a signal with
:meth:`Worker.run_until_signal`) stops reserving, lets running handlers
finish within ``shutdown_timeout`` and reports their outcomes; handlers still
running then are cancelled and not reported, so their jobs are delivered
again after their leases without spending an attempt.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import signal
import socket
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Sequence, Set, Union

from . import _wire
from .client import SeppClient
from .errors import EffectInProgressError, LeaseLostError, SeppError
from .types import Completion, Job, JobState, Reservation

__all__ = [
    "Worker",
    "DeliveredJob",
    "Handler",
    "PermanentError",
    "RetryAfterError",
]

_log = logging.getLogger("sepp.worker")

#: The most jobs one Reserve asks for (the server's limit).
MAX_RESERVE = 1000
#: When a job whose effect was in progress elsewhere is tried again, seconds.
EFFECT_RETRY_DELAY = 1.0
#: How long run() still waits, after cancelling handlers at the shutdown
#: timeout, for them to return.
AFTER_CANCEL_GRACE = 5.0
#: The most completions in one CompleteBatch (the server's default
#: max_batch_size).
MAX_COMPLETIONS = 1000


class PermanentError(Exception):
    """Raise it from a handler to dead-letter the job at once, whatever its
    attempts left. Its message becomes the job's ``last_error``::

        raise PermanentError("malformed address") from err
    """


class RetryAfterError(Exception):
    """Raise it from a handler to retry the job after ``delay`` seconds (or a
    timedelta) instead of the queue's backoff, while it has attempts left::

        raise RetryAfterError("rate limited", delay=30)
    """

    def __init__(self, message: str = "", *, delay: Union[float, timedelta]) -> None:
        super().__init__(message)
        #: The delay before the retry, in seconds.
        self.delay: float = _wire.seconds(delay) or 0.0


@dataclass(frozen=True)
class DeliveredJob:
    """A job delivered to a handler: the job, and this delivery's lease.

    Attributes:
        job: the job as stored (``job.payload``, ``job.headers``, ...).
        attempt: the deliveries of this job, this one included.
        lease_token: holds the lease; the runtime uses it to report the outcome.
        lease_expires_at: when the lease ends unless extended (the runtime
            extends it while the handler runs).
    """

    job: Job
    attempt: int
    lease_token: str
    lease_expires_at: Optional[datetime]

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self.job.job_id

    @property
    def queue(self) -> str:
        """The job's queue."""
        return self.job.queue

    @property
    def job_type(self) -> str:
        """The job's type (which picked the handler)."""
        return self.job.job_type

    @property
    def payload(self) -> bytes:
        """The job's payload."""
        return self.job.payload

    @property
    def idempotency_key(self) -> Optional[str]:
        """The key the job was enqueued with, or None."""
        return self.job.idempotency_key

    @property
    def headers(self) -> Dict[str, str]:
        """The job's headers."""
        return self.job.headers

    @property
    def traceparent(self) -> Optional[str]:
        """The W3C trace context the producer enqueued the job in
        (``traceparent`` header), or None.

        The Go and TypeScript clients write it when the enqueue runs inside
        an OpenTelemetry span. Continue the trace in the handler with the
        ``opentelemetry`` package, which this client does not depend on::

            from opentelemetry import trace
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

            ctx = TraceContextTextMapPropagator().extract(job.headers)
            with trace.get_tracer("app").start_as_current_span(
                f"sepp.process {job.queue}", context=ctx, kind=trace.SpanKind.CONSUMER
            ):
                ...
        """
        return self.job.headers.get("traceparent")

    @property
    def tracestate(self) -> Optional[str]:
        """The vendor trace state that goes with :attr:`traceparent`
        (``tracestate`` header), or None."""
        return self.job.headers.get("tracestate")


#: A handler: an async function (or a plain one, run in a thread) of the
#: delivered job, returning the job's result (bytes, str or None).
Handler = Callable[[DeliveredJob], Union[Awaitable[Union[bytes, str, None]], bytes, str, None]]


def _error_text(exc: BaseException) -> str:
    """The text reported as a failed attempt's error."""
    if isinstance(exc, (PermanentError, RetryAfterError, SeppError)):
        return str(exc) or type(exc).__name__
    msg = str(exc)
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


class _Completer:
    """Coalesces the completions of concurrent handlers into CompleteBatch
    RPCs by natural batching: one RPC in flight, the completions that arrive
    meanwhile go together in the next. Each caller waits for its own
    completion to be durable. The sending task is started by a completion
    that finds the completer idle and ends when nothing is pending."""

    def __init__(self, client: SeppClient) -> None:
        self._client = client
        self._pending: List["tuple[Completion, asyncio.Future[None]]"] = []
        self._task: Optional["asyncio.Task[None]"] = None
        self._max = MAX_COMPLETIONS

    async def complete(self, c: Completion) -> None:
        """Completes one job, durably, or raises why not."""
        fut: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._pending.append((c, fut))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._send())
        await fut

    async def _send(self) -> None:
        """Sends the pending completions, batch after batch."""
        try:
            while self._pending:
                n = min(len(self._pending), self._max)
                batch = self._pending[:n]
                del self._pending[:n]
                try:
                    errs = await self._complete_batch([c for c, _ in batch])
                    for (_, fut), err in zip(batch, errs):
                        if not fut.done():
                            if err is None:
                                fut.set_result(None)
                            else:
                                fut.set_exception(err)
                except Exception as err:  # the whole RPC failed
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(err)
        finally:
            self._task = None

    async def _complete_batch(self, cs: List[Completion]) -> List[Optional[SeppError]]:
        """Sends cs, splitting it when the server's max_batch_size is below
        it (and remembering the smaller size)."""
        from .errors import BatchTooLargeError

        try:
            if len(cs) == 1:
                try:
                    await self._client.complete(cs[0].job_id, cs[0].lease_token, cs[0].result)
                    return [None]
                except SeppError as err:
                    if err.retryable:
                        raise
                    return [err]
            return await self._client.complete_batch(cs)
        except BatchTooLargeError:
            if len(cs) == 1:
                raise
            half = len(cs) // 2
            self._max = half
            return await self._complete_batch(cs[:half]) + await self._complete_batch(cs[half:])


class Worker:
    """Reserves jobs from ``queues`` and runs the handler registered for each
    job type, ``concurrency`` at a time.

    Args:
        client: the client to use (shared with producers if you like).
        queues: the queues to reserve from (one name, or several).
        concurrency: how many jobs run at once. Default 10.
        lease: how long each job is leased, in seconds; the runtime extends
            it every third of its length while the handler runs. None (the
            default): the queue's ``lease_ms``.
        wait: how long one Reserve waits for a job (long poll). Default 10 s.
        shutdown_timeout: how long shutdown lets running handlers finish.
            Default 30 s.
        worker_id: names this worker in the server's records. Default
            ``"HOSTNAME-PID"``.
        logger: receives the runtime's logs. Default ``logging.getLogger("sepp.worker")``.

    Use it with ``async with`` to run it in the background of a block (the
    block's end is a graceful shutdown), or ``await worker.run()`` until
    :meth:`stop`, or :meth:`run_until_signal`.
    """

    def __init__(
        self,
        client: SeppClient,
        queues: Union[str, Sequence[str]],
        *,
        concurrency: int = 10,
        lease: Optional[Union[float, timedelta]] = None,
        wait: Union[float, timedelta] = 10.0,
        shutdown_timeout: Union[float, timedelta] = 30.0,
        worker_id: Optional[str] = None,
        logger: Optional[logging.Logger] = None,
    ) -> None:
        self.client = client
        self.queues: List[str] = [queues] if isinstance(queues, str) else list(queues)
        if not self.queues:
            raise ValueError("queues is empty: name the queues to work on")
        self.concurrency = max(1, int(concurrency))
        self.lease = _wire.seconds(lease)
        self.wait = _wire.seconds(wait) or 10.0
        self.shutdown_timeout = _wire.seconds(shutdown_timeout) or 30.0
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.log = logger or _log
        self._handlers: Dict[str, Handler] = {}
        self._fallback: Optional[Handler] = None
        self._stopping: Optional[asyncio.Event] = None
        self._running: Set["asyncio.Task[None]"] = set()
        self._handler_tasks: Set["asyncio.Task[Any]"] = set()
        self._cut_short = False
        self._completer = _Completer(client)
        self._task: Optional["asyncio.Task[None]"] = None
        self._started = False

    # --- registration --------------------------------------------------------

    def handle(self, job_type: str, handler: Handler) -> None:
        """Registers ``handler`` for jobs of ``job_type``. Register before
        running."""
        self._handlers[job_type] = handler

    def handler(self, job_type: str) -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`handle`::

            @worker.handler("receipt")
            async def receipt(job): ...
        """

        def register(fn: Handler) -> Handler:
            """Registers fn."""
            self.handle(job_type, fn)
            return fn

        return register

    def handle_all(self, handler: Handler) -> None:
        """Registers ``handler`` for every job type without one of its own."""
        self._fallback = handler

    # --- running -------------------------------------------------------------

    def stop(self) -> None:
        """Asks a running worker to shut down gracefully (safe to call from a
        signal handler installed with ``loop.add_signal_handler``, and more
        than once). :meth:`run` then returns after the shutdown."""
        if self._stopping is None:
            self._stopping = asyncio.Event()
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping is not None and self._stopping.is_set()

    async def run(self) -> None:
        """Reserves and runs jobs until :meth:`stop`, then shuts down
        gracefully: stops reserving, lets running handlers finish within
        ``shutdown_timeout`` (reporting their outcomes), then cancels the
        rest (their jobs are delivered again once their leases end)."""
        if self._started:
            raise RuntimeError("a Worker runs once; create another")
        self._started = True
        if self._stopping is None:
            self._stopping = asyncio.Event()
        stopping = self._stopping
        slots = asyncio.Semaphore(self.concurrency)
        log = self.log
        log.info("worker %s started: queues=%s concurrency=%d", self.worker_id, self.queues, self.concurrency)
        stop_wait = asyncio.get_running_loop().create_task(stopping.wait())
        try:
            while not stopping.is_set():
                # Wait for at least one free slot, then ask for as many jobs
                # as there are free slots.
                acquire = asyncio.get_running_loop().create_task(slots.acquire())
                await asyncio.wait({acquire, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if not acquire.done():
                    acquire.cancel()
                    try:
                        await acquire
                    except asyncio.CancelledError:
                        pass
                    else:
                        slots.release()
                    break
                free = 1
                while free < min(self.concurrency, MAX_RESERVE) and not slots.locked():
                    await slots.acquire()  # does not block: a slot is free
                    free += 1
                reserve = asyncio.get_running_loop().create_task(
                    self.client.reserve(
                        self.queues, worker_id=self.worker_id, max_jobs=free, lease=self.lease, wait=self.wait
                    )
                )
                await asyncio.wait({reserve, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if not reserve.done():
                    # Stopping during a long poll: give it up. Jobs the
                    # server leased meanwhile are delivered again after
                    # their leases.
                    reserve.cancel()
                    try:
                        await reserve
                    except (asyncio.CancelledError, Exception):
                        pass
                if reserve.cancelled():
                    for _ in range(free):
                        slots.release()
                    break
                err = reserve.exception()
                jobs: List[Reservation] = [] if err is not None else reserve.result()
                for _ in range(free - len(jobs)):
                    slots.release()
                if err is not None:
                    if not stopping.is_set():
                        log.warning("reserve failed; retrying in 1 s: %s", err)
                        try:
                            await asyncio.wait_for(asyncio.shield(stop_wait), 1.0)
                        except asyncio.TimeoutError:
                            pass
                    continue
                for r in jobs:
                    task = asyncio.get_running_loop().create_task(self._run_job(r, slots))
                    self._running.add(task)
                    task.add_done_callback(self._running.discard)
        finally:
            stop_wait.cancel()
            await self._shutdown()

    async def _shutdown(self) -> None:
        """Waits for running jobs, within shutdown_timeout, then cancels the rest."""
        log = self.log
        if self._running:
            log.info("worker %s stopping: waiting for %d running jobs (timeout %.1fs)",
                     self.worker_id, len(self._running), self.shutdown_timeout)
            _, pending = await asyncio.wait(set(self._running), timeout=self.shutdown_timeout)
            if pending:
                log.warning(
                    "shutdown timeout: cancelling %d running jobs; their leases are no longer "
                    "extended and they will be delivered again", len(pending))
                self._cut_short = True
                for t in list(self._handler_tasks):
                    t.cancel()
                _, still = await asyncio.wait(pending, timeout=AFTER_CANCEL_GRACE)
                if still:
                    log.warning("some handlers ignore cancellation and are still running; returning without them")
                    for t in still:
                        t.cancel()
        log.info("worker %s stopped", self.worker_id)

    async def run_until_signal(self, signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
        """Runs the worker until one of ``signals`` arrives (SIGTERM and
        SIGINT by default), then shuts down gracefully: running jobs finish
        and are reported before this returns. The signal handlers are removed
        afterwards. Unix only (it uses ``loop.add_signal_handler``)."""
        remove = self.install_signal_handlers(signals)
        try:
            await self.run()
        finally:
            remove()

    def install_signal_handlers(
        self, signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT)
    ) -> Callable[[], None]:
        """Makes ``signals`` (SIGTERM and SIGINT by default) stop the worker
        gracefully, for programs that run it with ``async with`` or
        :meth:`run` themselves. Returns a function that removes the handlers.
        Call it from a coroutine on the loop that runs the worker (Unix only)::

            async with Worker(client, "emails") as worker:
                remove = worker.install_signal_handlers()
                await worker.stopped()
        """
        loop = asyncio.get_running_loop()
        sigs = list(signals)
        for s in sigs:
            loop.add_signal_handler(s, self._on_signal, s)

        def remove() -> None:
            for s in sigs:
                loop.remove_signal_handler(s)

        return remove

    async def stopped(self) -> None:
        """Waits until the worker started with ``async with`` has been asked
        to stop (by :meth:`stop` or a signal) and has shut down."""
        if self._stopping is None:
            self._stopping = asyncio.Event()
        await self._stopping.wait()
        if self._task is not None:
            await asyncio.shield(self._task)

    def _on_signal(self, signum: int) -> None:
        """The signal handler: a graceful stop."""
        self.log.info("worker %s: got %s, shutting down gracefully", self.worker_id, signal.Signals(signum).name)
        self.stop()

    async def __aenter__(self) -> "Worker":
        """Starts :meth:`run` in a background task."""
        if self._stopping is None:
            self._stopping = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self.run())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        """Stops the worker gracefully and waits for the shutdown."""
        self.stop()
        if self._task is not None:
            await self._task

    # --- one job -------------------------------------------------------------

    def _handler_for(self, job_type: str) -> Optional[Handler]:
        """The handler of a job type, or the fallback."""
        return self._handlers.get(job_type, self._fallback)

    async def _call(self, job: DeliveredJob) -> Union[bytes, str, None]:
        """Runs the job's handler (a plain function in a thread)."""
        h = self._handler_for(job.job_type)
        if h is None:
            raise LookupError(
                f"no handler registered for job type {job.job_type!r} on worker {self.worker_id}"
            )
        if inspect.iscoroutinefunction(h):
            return await h(job)  # type: ignore[no-any-return,misc]
        result = await asyncio.to_thread(h, job)
        if inspect.isawaitable(result):
            return await result  # type: ignore[no-any-return]
        return result  # type: ignore[return-value]

    async def _run_job(self, r: Reservation, slots: asyncio.Semaphore) -> None:
        """Runs one reserved job with its lease extended, and reports its
        outcome; frees its slot when the handler returns."""
        job = DeliveredJob(job=r.job, attempt=r.attempt, lease_token=r.lease_token, lease_expires_at=r.lease_expires_at)
        log = self.log
        handler_task = asyncio.get_running_loop().create_task(self._call(job))
        self._handler_tasks.add(handler_task)
        lease = r.lease
        if lease <= 0 and r.lease_expires_at is not None:
            lease = max((r.lease_expires_at - datetime.now(r.lease_expires_at.tzinfo)).total_seconds(), 0.1)
        extender = asyncio.get_running_loop().create_task(self._extend(job, lease or 30.0, handler_task))
        lease_lost = False
        try:
            try:
                result = await handler_task
                error: Optional[BaseException] = None
            except asyncio.CancelledError:
                # Cancelled by the shutdown timeout or a lost lease (or the
                # whole task was cancelled).
                result, error = None, asyncio.CancelledError()
            except Exception as exc:
                result, error = None, exc
        finally:
            self._handler_tasks.discard(handler_task)
            slots.release()  # the slot frees when the handler returns
            extender.cancel()
            try:
                lease_lost = await extender
            except asyncio.CancelledError:
                pass
        if isinstance(error, asyncio.CancelledError):
            if lease_lost:
                log.warning("job %s: handler cancelled after its lease was lost", job.job_id)
            else:
                log.warning("job %s cut short by shutdown; it will be delivered again after its lease", job.job_id)
            return
        try:
            if error is None:
                payload = result.encode("utf-8") if isinstance(result, str) else bytes(result or b"")
                await self._completer.complete(Completion(job.job_id, job.lease_token, payload))
                return
            await self._report_failure(job, error)
        except SeppError as err:
            log.warning("job %s: reporting its outcome failed; it will be delivered again: %s", job.job_id, err)

    async def _report_failure(self, job: DeliveredJob, error: BaseException) -> None:
        """Fails the job: permanent, retry-after, or the queue's backoff."""
        retry_after: Optional[float] = None
        permanent = False
        if isinstance(error, PermanentError):
            permanent = True
        elif isinstance(error, RetryAfterError):
            retry_after = error.delay
        elif isinstance(error, EffectInProgressError):
            # Another delivery is running this job's effect: come back
            # soon, when it has finished, rather than after the backoff.
            retry_after = EFFECT_RETRY_DELAY
        else:
            self.log.warning(
                "job %s (%s, attempt %d) failed:\n%s", job.job_id, job.job_type, job.attempt,
                "".join(traceback.format_exception(error)).rstrip(),
            )
        res = await self.client.fail(
            job.job_id, job.lease_token, _error_text(error), retry_after=retry_after, permanent=permanent
        )
        if res.state is JobState.DEAD:
            self.log.warning("job %s failed and is dead: %s", job.job_id, _error_text(error))
        else:
            self.log.info("job %s failed; will retry at %s: %s", job.job_id, res.next_run_at, _error_text(error))

    async def _extend(self, job: DeliveredJob, lease: float, handler_task: "asyncio.Task[Any]") -> bool:
        """Renews the job's lease every third of its length until cancelled.
        If the lease is lost, cancels the handler and returns True."""
        every = max(lease / 3.0, 0.01)
        while True:
            await asyncio.sleep(every)
            try:
                await self.client.extend_lease(job.job_id, job.lease_token, lease)
            except LeaseLostError:
                self.log.warning(
                    "job %s: lease lost: cancelling the handler; the job belongs to another delivery now", job.job_id
                )
                handler_task.cancel()
                return True
            except SeppError as err:
                self.log.warning("job %s: lease extension failed; will retry: %s", job.job_id, err)
