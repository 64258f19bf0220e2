"""The producer side against a real server: every enqueue field, jobs, keys,
local key checks (acceptance 2), typed errors, batches (acceptance 3),
natural batching and its switch."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import List

import pytest

import sepp
from sepp import EnqueueRequest, JobState, SeppClient
from sepp_server import SeppServer, free_port


async def test_enqueue_every_field_round_trips(client: SeppClient, queue: str) -> None:
    run_at = datetime.now(timezone.utc) + timedelta(hours=1)
    payload = bytes(range(256))  # not UTF-8: bytes travel as bytes
    ack = await client.enqueue(
        EnqueueRequest(
            queue,
            "receipt",
            payload=payload,
            idempotency_key="order-1",
            priority=7,
            run_at=run_at,
            max_attempts=3,
            headers={"trace-id": "abc", "tenant": "t1"},
        )
    )
    assert ack.job_id and not ack.deduplicated and ack.dedup_expires_at is not None
    job = await client.get_job(ack.job_id)
    assert job.job_id == ack.job_id
    assert (job.queue, job.job_type, job.payload) == (queue, "receipt", payload)
    assert job.idempotency_key == "order-1"
    assert job.priority == 7 and job.max_attempts == 3
    assert job.headers == {"trace-id": "abc", "tenant": "t1"}
    assert job.state is JobState.SCHEDULED
    assert job.run_at is not None and abs((job.run_at - run_at).total_seconds()) < 0.001
    assert job.created_at is not None and job.attempts == 0

    again = await client.enqueue(EnqueueRequest(queue, "receipt", payload=payload, idempotency_key="order-1"))
    assert again.deduplicated and again.job_id == ack.job_id and not again.payload_mismatch
    assert again.original_enqueued_at is not None

    other = await client.enqueue(EnqueueRequest(queue, "receipt", payload=b"else", idempotency_key="order-1"))
    assert other.deduplicated and other.payload_mismatch and other.job_id == ack.job_id


async def test_str_payload_and_timedelta_run_at(client: SeppClient, queue: str) -> None:
    ack = await client.enqueue(EnqueueRequest(queue, "t", payload='{"é": 1}', run_at=timedelta(minutes=5)))
    job = await client.get_job(ack.job_id)
    assert job.payload == '{"é": 1}'.encode() and job.state is JobState.SCHEDULED
    assert job.idempotency_key is None


def test_naive_run_at_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        EnqueueRequest("q", "t", run_at=datetime.now()).to_proto()


def test_empty_key_is_sent_not_dropped() -> None:
    """An explicitly empty key is never silently "no key"."""
    empty = EnqueueRequest("q", "t", idempotency_key="").to_proto()
    assert empty.HasField("idempotency_key") and empty.idempotency_key == ""
    assert b'"\x00' in empty.SerializeToString()  # field 4, length 0: on the wire
    assert not EnqueueRequest("q", "t").to_proto().HasField("idempotency_key")


async def test_get_cancel_lookup_release(client: SeppClient, queue: str) -> None:
    ack = await client.enqueue(EnqueueRequest(queue, "t", idempotency_key="k1", run_at=timedelta(hours=1)))
    look = await client.lookup_idempotency_key(queue, "k1")
    assert look.found and look.job_id == ack.job_id and look.hits == 0
    assert look.state is JobState.SCHEDULED and look.expires_at and look.first_enqueued_at

    hit = await client.enqueue(EnqueueRequest(queue, "t", idempotency_key="k1"))
    assert hit.deduplicated
    assert (await client.lookup_idempotency_key(queue, "k1")).hits == 1

    cancelled = await client.cancel_job(ack.job_id)
    assert cancelled.state is JobState.CANCELLED and cancelled.finalized_at is not None
    assert (await client.get_job(ack.job_id)).state is JobState.CANCELLED
    # Cancelling a finished job changes nothing.
    assert (await client.cancel_job(ack.job_id)).state is JobState.CANCELLED

    rel = await client.release_idempotency_key(queue, "k1")
    assert rel.released and rel.job_id == ack.job_id
    assert not (await client.lookup_idempotency_key(queue, "k1")).found
    assert not (await client.release_idempotency_key(queue, "k1")).released
    fresh = await client.enqueue(EnqueueRequest(queue, "t", idempotency_key="k1"))
    assert not fresh.deduplicated and fresh.job_id != ack.job_id

    missing = await client.lookup_idempotency_key(queue, "never")
    assert not missing.found and missing.job_id == ""


async def test_job_not_found(client: SeppClient) -> None:
    with pytest.raises(sepp.JobNotFoundError) as info:
        await client.get_job("0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d")
    assert info.value.code == "not_found" and info.value.reason == "JOB_NOT_FOUND"
    with pytest.raises(sepp.InvalidFieldError) as bad:
        await client.get_job("not-an-id")
    assert bad.value.metadata.get("field") == "job_id"


# --- acceptance 2: local key checks, typed server errors -------------------


async def test_too_long_keys_fail_locally_and_send_nothing(client: SeppClient, queue: str) -> None:
    for key in ("k" * 257, "é" * 129):  # 257 bytes; 129 characters of 2 bytes = 258 bytes
        with pytest.raises(sepp.IdempotencyKeyTooLongError) as info:
            await client.enqueue(EnqueueRequest(queue, "t", idempotency_key=key))
        assert info.value.code == "invalid_argument"
        assert f"is {len(key.encode())} bytes; the limit is 256" in info.value.message
        with pytest.raises(sepp.IdempotencyKeyTooLongError):
            await client.lookup_idempotency_key(queue, "k" * 300)
    with pytest.raises(sepp.IdempotencyKeyEmptyError):
        await client.enqueue(EnqueueRequest(queue, "t", idempotency_key=""))
    # Nothing reached the server: the queue does not even exist.
    assert await client.queue_info(queue) == sepp.QueueInfo(name=queue)
    # 128 two-byte characters are 256 bytes: accepted, counted in bytes.
    ack = await client.enqueue(EnqueueRequest(queue, "t", idempotency_key="é" * 128))
    assert not ack.deduplicated


async def test_local_checks_need_no_server() -> None:
    """The checks run before anything is sent: with no server at all, the
    error is the key's, not a connection failure."""
    nowhere = f"http://127.0.0.1:{free_port()}"
    async with SeppClient.connect(nowhere, check=False) as c:
        with pytest.raises(sepp.IdempotencyKeyTooLongError):
            await c.enqueue(EnqueueRequest("q", "t", idempotency_key="é" * 129))
        with pytest.raises(sepp.IdempotencyKeyEmptyError):
            await c.enqueue(EnqueueRequest("q", "t", idempotency_key=""))
        with pytest.raises(sepp.UnavailableError):
            await c.enqueue(EnqueueRequest("q", "t", idempotency_key="fine"))


async def test_server_too_long_arrives_typed(server: SeppServer, queue: str) -> None:
    async with SeppClient.connect(server.url, max_idempotency_key_bytes=None) as c:
        with pytest.raises(sepp.IdempotencyKeyTooLongError) as info:
            await c.enqueue(EnqueueRequest(queue, "t", idempotency_key="é" * 129))
        assert "258 bytes" in info.value.message and info.value.code == "invalid_argument"


async def test_connect_to_nothing_is_unavailable() -> None:
    with pytest.raises(sepp.UnavailableError, match="cannot reach the server"):
        await SeppClient.connect(f"http://127.0.0.1:{free_port()}")


async def test_unknown_queue_from_strict_server(make_server) -> None:  # type: ignore[no-untyped-def]
    srv = make_server('[server]\nstrict = true\n\n[[queues]]\nname = "emails"\n')
    async with SeppClient.connect(srv.url) as c:
        with pytest.raises(sepp.UnknownQueueError) as info:
            await c.enqueue(EnqueueRequest("email", "receipt", idempotency_key="k"))
        err = info.value
        assert err.code == "not_found" and err.reason == "UNKNOWN_QUEUE"
        assert err.metadata.get("queue") == "email" and "strict = true" in err.message
        assert isinstance(err, sepp.SeppError)
        ack = await c.enqueue(EnqueueRequest("emails", "receipt", idempotency_key="k"))
        assert not ack.deduplicated


async def test_key_conflict_from_reject_mismatch_queue(make_server) -> None:  # type: ignore[no-untyped-def]
    srv = make_server('[[queues]]\nname = "payments"\nkey_reuse = "reject_mismatch"\n')
    async with SeppClient.connect(srv.url) as c:
        first = await c.enqueue(EnqueueRequest("payments", "charge", payload=b'{"cents":999}', idempotency_key="charge-77"))
        same = await c.enqueue(EnqueueRequest("payments", "charge", payload=b'{"cents":999}', idempotency_key="charge-77"))
        assert same.deduplicated and same.job_id == first.job_id
        with pytest.raises(sepp.IdempotencyKeyConflictError) as info:
            await c.enqueue(EnqueueRequest("payments", "charge", payload=b'{"cents":1}', idempotency_key="charge-77"))
        assert info.value.code == "already_exists" and info.value.reason == "IDEMPOTENCY_KEY_CONFLICT"


# --- acceptance 3: batches --------------------------------------------------


async def test_non_atomic_batch_per_item_results_in_order(client: SeppClient, queue: str) -> None:
    first = await client.enqueue(EnqueueRequest(queue, "t", idempotency_key="b-0"))
    results = await client.enqueue_batch(
        [
            EnqueueRequest(queue, "t", idempotency_key="b-0"),  # a hit
            EnqueueRequest(queue, "t", idempotency_key="b-1"),  # new
            EnqueueRequest(queue, "t", idempotency_key="k" * 257),  # too long: local
            EnqueueRequest(queue, "t", max_attempts=-1),  # the server refuses it
            EnqueueRequest(queue, "t", idempotency_key="b-1"),  # a hit on item 1
            EnqueueRequest(queue, "t"),  # new, unkeyed
        ]
    )
    assert len(results) == 6
    assert results[0].ok and results[0].ack and results[0].ack.deduplicated and results[0].ack.job_id == first.job_id
    assert results[1].ok and results[1].ack and not results[1].ack.deduplicated
    assert isinstance(results[2].error, sepp.IdempotencyKeyTooLongError)
    assert isinstance(results[3].error, sepp.InvalidFieldError) and "max_attempts" in results[3].error.message
    assert results[4].ack and results[4].ack.deduplicated and results[4].ack.job_id == results[1].ack.job_id
    assert results[5].ack and not results[5].ack.deduplicated
    with pytest.raises(sepp.InvalidFieldError):
        results[3].unwrap()
    info = await client.queue_info(queue)
    assert info.available == 3 and info.dedup_records == 2


async def test_atomic_batch_with_one_bad_item_writes_nothing(client: SeppClient, queue: str) -> None:
    good = [EnqueueRequest(queue, "t", idempotency_key=f"a-{i}") for i in range(3)]
    # Refused by the server:
    with pytest.raises(sepp.InvalidFieldError) as info:
        await client.enqueue_batch(good + [EnqueueRequest(queue, "t", max_attempts=-1)], atomic=True)
    assert info.value.index == 3
    # Refused locally, before sending:
    with pytest.raises(sepp.IdempotencyKeyEmptyError) as local:
        await client.enqueue_batch([good[0], EnqueueRequest(queue, "t", idempotency_key="")], atomic=True)
    assert local.value.index == 1 and local.value.message.startswith("jobs[1]: ")
    for i in range(3):
        assert not (await client.lookup_idempotency_key(queue, f"a-{i}")).found
    assert (await client.queue_info(queue)).available == 0

    results = await client.enqueue_batch(good + [EnqueueRequest(queue, "t", idempotency_key="a-0")], atomic=True)
    assert [r.ack.deduplicated for r in results if r.ack] == [False, False, False, True]
    assert results[3].ack and results[0].ack and results[3].ack.job_id == results[0].ack.job_id


async def test_batch_too_large_is_typed(make_server) -> None:  # type: ignore[no-untyped-def]
    srv = make_server("[server]\nmax_batch_size = 5\n")
    async with SeppClient.connect(srv.url) as c:
        with pytest.raises(sepp.BatchTooLargeError):
            await c.enqueue_batch([EnqueueRequest("q", "t") for _ in range(6)])


# --- natural batching ------------------------------------------------------


class _Spy:
    """Counts the RPCs a client sends, by method (a spy on the real
    transport: every call still goes to the real server)."""

    def __init__(self, client: SeppClient) -> None:
        self.paths: List[str] = []
        real = client._http.post

        async def post(url, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.paths.append(str(url))
            return await real(url, *args, **kwargs)

        client._http.post = post  # type: ignore[method-assign]


async def test_concurrent_enqueues_coalesce_into_batches(server: SeppServer, queue: str) -> None:
    async with SeppClient.connect(server.url) as c:
        spy = _Spy(c)
        n = 500
        acks = await asyncio.gather(
            *(c.enqueue(EnqueueRequest(queue, "t", idempotency_key=f"nb-{i}", payload=b"x" * 16)) for i in range(n))
        )
        assert len({a.job_id for a in acks}) == n and not any(a.deduplicated for a in acks)
        batches = spy.paths.count("/sepp.v1.JobService/EnqueueBatch")
        assert batches >= 1 and len(spy.paths) < n / 5, spy.paths
        # Each caller got its own ack: the key's job is the caller's job.
        for i in (0, 137, n - 1):
            assert (await c.lookup_idempotency_key(queue, f"nb-{i}")).job_id == acks[i].job_id
        # Per-caller errors inside one coalesced batch.
        mixed = await asyncio.gather(
            *(
                c.enqueue(EnqueueRequest(queue, "t", max_attempts=-1 if i % 2 else 0))
                for i in range(40)
            ),
            return_exceptions=True,
        )
        assert all(isinstance(r, sepp.InvalidFieldError) == bool(i % 2) for i, r in enumerate(mixed))


async def test_idle_client_sends_at_once_and_batching_can_be_off(server: SeppServer, queue: str) -> None:
    async with SeppClient.connect(server.url) as c:
        spy = _Spy(c)
        await c.enqueue(EnqueueRequest(queue, "t"))
        assert spy.paths == ["/sepp.v1.JobService/Enqueue"]
    async with SeppClient.connect(server.url, batching=False) as c:
        spy = _Spy(c)
        await asyncio.gather(*(c.enqueue(EnqueueRequest(queue, "t")) for _ in range(50)))
        assert spy.paths == ["/sepp.v1.JobService/Enqueue"] * 50


async def test_batcher_learns_a_smaller_server_batch_limit(make_server) -> None:  # type: ignore[no-untyped-def]
    srv = make_server("[server]\nmax_batch_size = 10\n")
    async with SeppClient.connect(srv.url) as c:
        acks = await asyncio.gather(*(c.enqueue(EnqueueRequest("q", "t", idempotency_key=f"s-{i}")) for i in range(300)))
        assert len({a.job_id for a in acks}) == 300
        assert (await c.queue_info("q")).available == 300


def test_options_token_and_addresses() -> None:
    async def go() -> None:
        c = await SeppClient.connect("127.0.0.1:1", token="s3cret", check=False, headers={"X-Team": "a"})
        assert c._http.headers["Authorization"] == "Bearer s3cret"
        assert c._http.headers["X-Team"] == "a"
        assert c.address == "http://127.0.0.1:1"
        await c.close()
        with pytest.raises(ValueError):
            await SeppClient.connect("ftp://x:1", check=False)

    asyncio.run(go())
