"""A Complete, Fail or CompleteEffect sent again with the token whose first
call was committed (its answer lost to a timeout or a restart) succeeds and
changes nothing; another token gets LeaseLostError. The client resends these
calls after transport errors for that reason."""

from __future__ import annotations

import pytest

import sepp
from sepp import EnqueueRequest, SeppClient


async def test_repeated_complete_and_fail_succeed(client: SeppClient, queue: str) -> None:
    await client.enqueue(EnqueueRequest(queue, "t", idempotency_key="done"))
    await client.enqueue(EnqueueRequest(queue, "t", idempotency_key="failed"))
    r = await client.reserve([queue], max_jobs=2)
    assert len(r) == 2
    done, failed = r
    await client.complete(done.job.job_id, done.lease_token, b"ok")
    await client.complete(done.job.job_id, done.lease_token, b"ok")  # the repeat
    with pytest.raises(sepp.LeaseLostError):
        await client.complete(done.job.job_id, "0123456789abcdef0123456789abcdef")
    job = await client.get_job(done.job.job_id)
    assert job.state is sepp.JobState.COMPLETED and job.result == b"ok"

    first = await client.fail(failed.job.job_id, failed.lease_token, "boom", permanent=True)
    again = await client.fail(failed.job.job_id, failed.lease_token, "boom", permanent=True)
    assert (first.state, first.already_failed) == (sepp.JobState.DEAD, False)
    assert (again.state, again.already_failed) == (sepp.JobState.DEAD, True)


async def test_repeated_complete_effect_returns_the_stored_result(client: SeppClient, queue: str) -> None:
    claim = await client.claim_effect(queue, "order-9.invoice")
    assert claim.state is sepp.EffectState.ACQUIRED
    assert await client.complete_effect(claim.token, b"em_1") == b"em_1"
    assert await client.complete_effect(claim.token, b"em_2") == b"em_1"  # what the first call stored
    with pytest.raises(sepp.LeaseLostError):
        await client.complete_effect("0123456789abcdef0123456789abcdef", b"")
