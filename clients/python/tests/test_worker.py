"""Acceptance 5: the worker runtime against a real server. 2,000 jobs at
concurrency 16 each run once; a permanent error dead-letters its job; a
worker killed mid-job has its job delivered again after the lease; SIGTERM
lets running jobs finish. Also retries, retry-after and lease extension."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from typing import Awaitable, Callable

import pytest

import sepp
from sepp import DeliveredJob, EnqueueRequest, JobState, PermanentError, RetryAfterError, SeppClient, Worker
from sepp_server import CLIENT_DIR, SeppServer

HERE = os.path.dirname(__file__)


async def wait_until(what: str, cond: Callable[[], Awaitable[bool]], timeout: float = 60.0) -> None:
    """Polls cond until it holds; fails the test (naming what) after timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_2000_jobs_concurrency_16_each_handler_runs_once(client: SeppClient, queue: str) -> None:
    n = 2000
    ids = []
    for start in range(0, n, 1000):
        results = await client.enqueue_batch(
            [EnqueueRequest(queue, "t", payload=str(i).encode(), idempotency_key=f"w-{i}") for i in range(start, start + 1000)]
        )
        ids += [r.unwrap().job_id for r in results]
    runs: Counter[str] = Counter()
    in_flight = 0
    peak = 0

    worker = Worker(client, queue, concurrency=16, wait=0.2)

    @worker.handler("t")
    async def handle(job: DeliveredJob) -> bytes:
        nonlocal in_flight, peak
        runs[job.job_id] += 1
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        return b"done " + job.payload

    async with worker:
        await wait_until("every job completed", lambda: _completed(client, queue, n), timeout=120)
    assert len(runs) == n and set(runs.values()) == {1}, [k for k, v in runs.items() if v != 1][:5]
    assert sum(runs.values()) == n
    assert 1 < peak <= 16
    info = await client.queue_info(queue)
    assert info.completed == n and info.available + info.reserved + info.scheduled + info.dead == 0
    job = await client.get_job(ids[7])
    assert job.state is JobState.COMPLETED and job.result == b"done 7" and job.attempts == 1
    look = await client.lookup_idempotency_key(queue, "w-7")
    assert look.state is JobState.COMPLETED and look.result == b"done 7"


async def _completed(client: SeppClient, queue: str, n: int) -> bool:
    return (await client.queue_info(queue)).completed == n


async def test_failures_retry_then_dead_letter_and_permanent_at_once(make_server) -> None:  # type: ignore[no-untyped-def]
    srv = make_server('[[queues]]\nname = "q"\nmax_attempts = 3\nbackoff_initial_ms = 20\nbackoff_max_ms = 40\n')
    async with SeppClient.connect(srv.url) as c:
        flaky = await c.enqueue(EnqueueRequest("q", "flaky", idempotency_key="k"))
        perm = await c.enqueue(EnqueueRequest("q", "perm"))
        boom = await c.enqueue(EnqueueRequest("q", "boom"))
        stray = await c.enqueue(EnqueueRequest("q", "nobody-handles-this"))
        attempts: Counter[str] = Counter()
        worker = Worker(c, "q", wait=0.1)

        @worker.handler("flaky")
        async def flaky_h(job: DeliveredJob) -> None:
            attempts["flaky"] += 1
            raise OSError(f"smtp down (attempt {job.attempt})")

        @worker.handler("perm")
        async def perm_h(job: DeliveredJob) -> None:
            attempts["perm"] += 1
            raise PermanentError("malformed address")

        @worker.handler("boom")
        def boom_h(job: DeliveredJob) -> None:  # a plain function runs in a thread
            {}["missing"]

        async with worker:
            await wait_until("four jobs dead", lambda: _dead(c, "q", 4))
            # A requeued dead letter runs again, attempts reset.
            assert await c.requeue_dead_jobs(job_ids=[perm.job_id]) == 1
            await wait_until("the requeued job to die again", lambda: _ran_twice(attempts, c, perm.job_id))
        j = await c.get_job(flaky.job_id)
        assert j.state is JobState.DEAD and j.attempts == 3 and j.last_error == "OSError: smtp down (attempt 3)"
        assert attempts["flaky"] == 3
        j = await c.get_job(perm.job_id)
        assert j.state is JobState.DEAD and j.attempts == 1 and j.last_error == "malformed address"
        j = await c.get_job(boom.job_id)
        assert j.state is JobState.DEAD and j.attempts == 3 and j.last_error == "KeyError: 'missing'"
        j = await c.get_job(stray.job_id)
        assert j.state is JobState.DEAD and "no handler registered" in j.last_error

        # The dead letters can be purged; the key's record outlives them.
        assert await c.purge_dead_jobs(queue="q") == 4
        look = await c.lookup_idempotency_key("q", "k")
        assert look.found and look.job_id == flaky.job_id and look.state is JobState.DELETED


async def _ran_twice(attempts: Counter[str], c: SeppClient, job_id: str) -> bool:
    return attempts["perm"] == 2 and (await c.get_job(job_id)).state is JobState.DEAD


async def _dead(c: SeppClient, queue: str, n: int) -> bool:
    return (await c.queue_info(queue)).dead == n


async def test_retry_after_replaces_the_backoff(make_server) -> None:  # type: ignore[no-untyped-def]
    srv = make_server('[[queues]]\nname = "q"\nbackoff_initial_ms = 3600000\n')
    async with SeppClient.connect(srv.url) as c:
        ack = await c.enqueue(EnqueueRequest("q", "t"))
        runs = 0
        worker = Worker(c, "q", wait=0.1)

        @worker.handler("t")
        async def h(job: DeliveredJob) -> bytes:
            nonlocal runs
            runs += 1
            if runs == 1:
                raise RetryAfterError("rate limited", delay=0.1)
            return b"ok"

        async with worker:
            # With the queue's one-hour backoff this would not finish.
            await wait_until("the retried job to complete", lambda: _state(c, ack.job_id, JobState.COMPLETED))
        assert (await c.get_job(ack.job_id)).attempts == 2


async def test_effect_in_progress_retries_soon(make_server) -> None:  # type: ignore[no-untyped-def]
    srv = make_server('[[queues]]\nname = "q"\nbackoff_initial_ms = 3600000\n')
    async with SeppClient.connect(srv.url) as c:
        ack = await c.enqueue(EnqueueRequest("q", "t"))
        runs = 0
        worker = Worker(c, "q", wait=0.1)

        @worker.handler("t")
        async def h(job: DeliveredJob) -> None:
            nonlocal runs
            runs += 1
            if runs == 1:
                raise sepp.EffectInProgressError("mail in progress elsewhere")

        async with worker:
            await wait_until("the job to complete on its retry", lambda: _state(c, ack.job_id, JobState.COMPLETED))
        assert runs == 2


async def _state(c: SeppClient, job_id: str, state: JobState) -> bool:
    return (await c.get_job(job_id)).state is state


async def test_lease_is_extended_while_the_handler_runs(make_server) -> None:  # type: ignore[no-untyped-def]
    srv = make_server('[[queues]]\nname = "q"\nlease_ms = 1000\n')
    async with SeppClient.connect(srv.url) as c:
        ack = await c.enqueue(EnqueueRequest("q", "slow"))
        worker = Worker(c, "q", wait=0.1)

        @worker.handler("slow")
        async def slow(job: DeliveredJob) -> None:
            await asyncio.sleep(3.0)  # three leases

        async with worker:
            await wait_until("the slow job to complete", lambda: _state(c, ack.job_id, JobState.COMPLETED))
        assert (await c.get_job(ack.job_id)).attempts == 1


async def test_graceful_shutdown_finishes_running_jobs(client: SeppClient, queue: str) -> None:
    ack = await client.enqueue(EnqueueRequest(queue, "t"))
    started = asyncio.Event()
    worker = Worker(client, queue, wait=0.1)

    @worker.handler("t")
    async def h(job: DeliveredJob) -> bytes:
        started.set()
        await asyncio.sleep(0.3)
        return b"finished"

    async with worker:
        await started.wait()
    # Leaving the block waited for the running job and reported it.
    job = await client.get_job(ack.job_id)
    assert job.state is JobState.COMPLETED and job.result == b"finished"


async def test_shutdown_timeout_leaves_the_job_for_redelivery(client: SeppClient, queue: str) -> None:
    ack = await client.enqueue(EnqueueRequest(queue, "t"))
    started = asyncio.Event()
    worker = Worker(client, queue, wait=0.1, shutdown_timeout=0.1)

    @worker.handler("t")
    async def h(job: DeliveredJob) -> None:
        started.set()
        await asyncio.sleep(3600)

    async with worker:
        await started.wait()
    job = await client.get_job(ack.job_id)
    assert job.state is JobState.RESERVED and job.attempts == 1 and job.last_error == ""


def _spawn_worker(srv: SeppServer, queue: str, mode: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(CLIENT_DIR / "src"))
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "worker_proc.py"), srv.url, queue, mode],
        env=env, stdout=subprocess.PIPE, text=True,
    )


async def _read_line(p: subprocess.Popen[str]) -> str:
    assert p.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(p.stdout.readline), 60)
    return line.strip()


async def test_worker_killed_mid_job_has_its_job_redelivered(make_server) -> None:  # type: ignore[no-untyped-def]
    srv = make_server('[[queues]]\nname = "q"\nlease_ms = 1000\n')
    async with SeppClient.connect(srv.url) as c:
        ack = await c.enqueue(EnqueueRequest("q", "t", idempotency_key="crash-me"))
        p = _spawn_worker(srv, "q", "hang")
        try:
            assert await _read_line(p) == f"started {ack.job_id}"
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait()
        assert (await c.get_job(ack.job_id)).state is JobState.RESERVED
        seen = []
        worker = Worker(c, "q", wait=0.1)

        @worker.handler("t")
        async def h(job: DeliveredJob) -> bytes:
            seen.append((job.job_id, job.attempt))
            return b"redelivered"

        async with worker:
            await wait_until("the job to be redelivered and completed", lambda: _state(c, ack.job_id, JobState.COMPLETED))
        assert seen == [(ack.job_id, 2)]
        job = await c.get_job(ack.job_id)
        assert job.attempts == 2 and job.result == b"redelivered"


async def test_sigterm_lets_running_jobs_finish(make_server) -> None:  # type: ignore[no-untyped-def]
    srv = make_server("")
    async with SeppClient.connect(srv.url) as c:
        first = await c.enqueue(EnqueueRequest("q", "t"))
        p = _spawn_worker(srv, "q", "slow")
        try:
            assert await _read_line(p) == f"started {first.job_id}"
            second = await c.enqueue(EnqueueRequest("q", "t"))
            p.send_signal(signal.SIGTERM)
            assert await _read_line(p) == "stopped"
            assert await asyncio.to_thread(p.wait, 30) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        job = await c.get_job(first.job_id)
        assert job.state is JobState.COMPLETED and job.result == b"finished" and job.attempts == 1
        # The stopping worker reserved nothing more.
        assert (await c.get_job(second.job_id)).state is JobState.AVAILABLE


async def test_signal_handlers_with_async_with(client: SeppClient, queue: str) -> None:
    ack = await client.enqueue(EnqueueRequest(queue, "t"))
    started = asyncio.Event()
    worker = Worker(client, queue, wait=0.1)

    @worker.handler("t")
    async def h(job: DeliveredJob) -> bytes:
        started.set()
        await asyncio.sleep(0.3)
        return b"finished"

    async with worker:
        remove = worker.install_signal_handlers([signal.SIGUSR1])
        try:
            await started.wait()
            os.kill(os.getpid(), signal.SIGUSR1)  # a real signal to this process
            await worker.stopped()
        finally:
            remove()
        assert worker.stopping
    job = await client.get_job(ack.job_id)
    assert job.state is JobState.COMPLETED and job.result == b"finished"
