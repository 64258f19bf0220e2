"""The admin calls against a real server: pausing or resuming a queue the
server does not know is refused unless ``create=True``, and a dead-letter
requeue or purge by id reports the ids that named no dead job."""

from __future__ import annotations

from typing import List, Optional

import pytest

import sepp
from sepp import EnqueueRequest, JobState, SeppClient

#: A well-formed job id that names no job.
NO_SUCH_JOB = "0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d"


async def _paused(client: SeppClient, queue: str) -> Optional[bool]:
    """Whether list_queues lists ``queue`` as paused (None: not listed)."""
    for q in await client.list_queues():
        if q.name == queue:
            return q.paused
    return None


async def _dead_jobs(client: SeppClient, queue: str, n: int) -> List[str]:
    """Enqueues ``n`` jobs to ``queue`` and dead-letters them; their ids."""
    for _ in range(n):
        await client.enqueue(EnqueueRequest(queue, "t"))
    got = await client.reserve(queue, max_jobs=n)
    assert len(got) == n
    for r in got:
        await client.fail(r.job.job_id, r.lease_token, "boom", permanent=True)
    return [r.job.job_id for r in got]


async def test_pausing_an_unknown_queue_is_refused_and_changes_nothing(client: SeppClient, queue: str) -> None:
    for call in (client.pause_queue, client.resume_queue):
        with pytest.raises(sepp.UnknownQueueError) as info:
            await call(queue)
        err = info.value
        assert (err.code, err.reason) == ("not_found", "UNKNOWN_QUEUE")
        assert err.metadata["queue"] == queue
        assert "create" in err.message
    assert await _paused(client, queue) is None, "a refused pause must not list the queue"


async def test_create_pauses_a_queue_before_its_first_job(client: SeppClient, queue: str) -> None:
    await client.pause_queue(queue, create=True)
    assert await _paused(client, queue) is True
    # Known now (its pause flag is stored): no create needed.
    await client.resume_queue(queue)
    assert await _paused(client, queue) is False
    await client.resume_queue(queue + "-never-paused", create=True)


async def test_a_queue_with_jobs_pauses_without_create(client: SeppClient, queue: str) -> None:
    await client.enqueue(EnqueueRequest(queue, "t"))
    await client.pause_queue(queue)
    assert await _paused(client, queue) is True
    await client.resume_queue(queue)
    assert await _paused(client, queue) is False


async def test_a_declared_queue_pauses_without_create(make_server) -> None:  # type: ignore[no-untyped-def]
    srv = make_server('[[queues]]\nname = "declared"\n')
    async with SeppClient.connect(srv.url) as c:
        await c.pause_queue("declared")
        assert await _paused(c, "declared") is True
        await c.resume_queue("declared")
        assert await _paused(c, "declared") is False


async def test_requeue_by_id_raises_not_dead_with_the_count(client: SeppClient, queue: str) -> None:
    [dead] = await _dead_jobs(client, queue, 1)
    live = await client.enqueue(EnqueueRequest(queue, "t"))
    with pytest.raises(sepp.NotDeadError) as info:
        await client.requeue_dead_jobs(job_ids=[dead, NO_SUCH_JOB, live.job_id, NO_SUCH_JOB])
    err = info.value
    assert isinstance(err, sepp.JobNotFoundError), "a NotDeadError is a JobNotFoundError"
    assert (err.code, err.reason) == ("not_found", "JOB_NOT_FOUND")
    assert err.count == 1
    assert err.job_ids == [NO_SUCH_JOB, live.job_id], "each once, in the order given"
    assert str(err) == f"JOB_NOT_FOUND: no dead job with id {NO_SUCH_JOB}, {live.job_id}"
    assert (await client.get_job(dead)).state is JobState.AVAILABLE
    assert (await client.get_job(live.job_id)).state is JobState.AVAILABLE


async def test_purge_by_id_raises_not_dead_with_the_count(client: SeppClient, queue: str) -> None:
    a, b = await _dead_jobs(client, queue, 2)
    with pytest.raises(sepp.NotDeadError) as info:
        await client.purge_dead_jobs(job_ids=[a, NO_SUCH_JOB])
    assert (info.value.count, info.value.job_ids) == (1, [NO_SUCH_JOB])
    with pytest.raises(sepp.JobNotFoundError):
        await client.get_job(a)
    # A dead job of another queue is not one of queue's.
    with pytest.raises(sepp.NotDeadError) as info:
        await client.purge_dead_jobs(queue=queue + "-other", job_ids=[b])
    assert (info.value.count, info.value.job_ids) == (0, [b])
    assert (await client.get_job(b)).state is JobState.DEAD


async def test_requeue_and_purge_return_the_count_when_every_id_was_dead(client: SeppClient, queue: str) -> None:
    ids = await _dead_jobs(client, queue, 3)
    assert await client.requeue_dead_jobs(job_ids=ids[:1]) == 1
    assert await client.purge_dead_jobs(queue=queue, all=True) == 2
    assert await client.purge_dead_jobs(queue=queue, all=True) == 0
