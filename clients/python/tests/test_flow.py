"""Flow control against a real server: ``when_running = "run_again"`` (a
trigger while the key's job runs makes one follow-up, named in the ack and
held until the running job ends) and ``[[queues.rules]]`` rules with a
limit, refusing (``action = "reject"``) or scheduling the job for when the
window has room (``action = "delay"``).

One server serves the module; each test uses keys and accounts of its own.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import AsyncIterator, Iterator

import pytest

import sepp
from sepp import EnqueueRequest, JobHold, JobState, SeppClient
from sepp_server import SeppServer

CONFIG = """
[[queues]]
name = "sync"
when_running = "run_again"

[[queues]]
name = "charges"
[[queues.rules]]
name = "account"
key_fields = ["/account"]
window_ms = 60000
limit = 2

[[queues]]
name = "mails"
[[queues.rules]]
name = "account"
key_fields = ["/account"]
window_ms = 60000
limit = 2
action = "delay"
"""

WINDOW = timedelta(milliseconds=60000)


@pytest.fixture(scope="module")
def flow_server() -> Iterator[SeppServer]:
    srv = SeppServer(CONFIG)
    yield srv
    srv.stop()


@pytest.fixture
async def c(flow_server: SeppServer) -> AsyncIterator[SeppClient]:
    async with SeppClient.connect(flow_server.url) as client:
        yield client


def account_payload() -> bytes:
    return f'{{"account":"acc-{uuid.uuid4().hex[:8]}"}}'.encode()


async def test_run_again_makes_one_follow_up_that_waits_for_the_running_job(c: SeppClient) -> None:
    req = EnqueueRequest("sync", "rebuild", idempotency_key=f"cache-{uuid.uuid4().hex[:8]}")
    first = await c.enqueue(req)
    assert not first.deduplicated and first.follows_job_id is None
    running = await c.reserve("sync", max_jobs=10)
    assert [r.job.job_id for r in running] == [first.job_id]

    # A trigger while the job runs: a new job that follows it, not a hit.
    follow = await c.enqueue(req)
    assert not follow.deduplicated
    assert follow.job_id != first.job_id
    assert follow.follows_job_id == first.job_id
    assert follow.delayed_until is None

    # Triggers while the follow-up waits are ordinary hits on it.
    again = await c.enqueue(req)
    assert again.deduplicated and again.job_id == follow.job_id
    assert again.follows_job_id is None

    waiting = await c.get_job(follow.job_id)
    assert waiting.state == JobState.SCHEDULED
    assert waiting.held_by == JobHold.FOLLOW_UP and waiting.held_by == "follow_up"
    assert waiting.follows_job_id == first.job_id
    assert waiting.held_until is None
    original = await c.get_job(first.job_id)
    assert original.held_by is None and original.follows_job_id is None

    q = await c.queue_info("sync")
    assert (q.held_follow_up, q.held_concurrency, q.held_rate) == (1, 0, 0), q

    # Nothing to reserve while the original runs; once it completes, the
    # follow-up is handed out.
    assert await c.reserve("sync", max_jobs=10) == []
    await c.complete(running[0].job.job_id, running[0].lease_token)
    after = await c.reserve("sync", max_jobs=10, wait=10)
    assert [r.job.job_id for r in after] == [follow.job_id]
    assert after[0].job.held_by is None and after[0].job.follows_job_id is None
    assert (await c.queue_info("sync")).held_follow_up == 0


async def test_a_rule_limit_refuses_with_the_limit_and_no_job(c: SeppClient) -> None:
    payload = account_payload()
    for _ in range(2):
        await c.enqueue(EnqueueRequest("charges", "charge", payload=payload))
    with pytest.raises(sepp.DedupRuleViolatedError) as info:
        await c.enqueue(EnqueueRequest("charges", "charge", payload=payload))
    md = info.value.metadata
    assert md.get("rule") == "account" and md.get("limit") == "2", md
    assert md.get("frees_at"), md
    # Two jobs hold the window, so none is named.
    assert "job_id" not in md, md


async def test_a_delaying_rule_schedules_the_job_for_when_the_window_has_room(c: SeppClient) -> None:
    payload = account_payload()
    before = datetime.now(timezone.utc)
    acks = [await c.enqueue(EnqueueRequest("mails", "mail", payload=payload)) for _ in range(3)]
    after = datetime.now(timezone.utc)
    assert acks[0].delayed_until is None and acks[1].delayed_until is None
    until = acks[2].delayed_until
    assert until is not None and until.tzinfo is not None
    assert not acks[2].deduplicated and acks[2].follows_job_id is None
    # The window of the first job ends a minute after it was enqueued.
    first = await c.get_job(acks[0].job_id)
    assert first.created_at is not None and until == first.created_at + WINDOW
    assert before + WINDOW - timedelta(seconds=1) <= until <= after + WINDOW + timedelta(seconds=1)
    delayed = await c.get_job(acks[2].job_id)
    assert delayed.state == JobState.SCHEDULED and delayed.run_at == until
