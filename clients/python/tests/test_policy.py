"""The queue dedup policies against a real server: ``on_duplicate`` =
replace, debounce and reject, ``require_key``, ``key_fields`` (the key the
server derived, in the ack, and lookup and release by payload),
``[[queues.rules]]``, and reject in batches, atomic and not.

One server with every policy on its own queue serves the whole module; each
test uses keys of its own.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import AsyncIterator, Iterator

import pytest

import sepp
from sepp import EnqueueRequest, JobState, SeppClient
from sepp_server import SeppServer

CONFIG = """
[[queues]]
name = "replace-q"
on_duplicate = "replace"

[[queues]]
name = "debounce-q"
on_duplicate = "debounce"
debounce_ms = 60000
debounce_max_wait_ms = 120000

[[queues]]
name = "capped-q"
on_duplicate = "debounce"
debounce_ms = 60000
debounce_max_wait_ms = 1000

[[queues]]
name = "reject-q"
on_duplicate = "reject"

[[queues]]
name = "need-key"
require_key = true

[[queues]]
name = "fields-q"
key_fields = ["/account", "/amount"]

[[queues]]
name = "rule-q"

[[queues.rules]]
name = "same-amount"
key_fields = ["/account", "/amount"]
window_ms = 60000
"""

DEBOUNCE = timedelta(milliseconds=60000)


@pytest.fixture(scope="module")
def policy_server() -> Iterator[SeppServer]:
    srv = SeppServer(CONFIG)
    yield srv
    srv.stop()


@pytest.fixture
async def c(policy_server: SeppServer) -> AsyncIterator[SeppClient]:
    async with SeppClient.connect(policy_server.url) as client:
        yield client


def key() -> str:
    return f"k-{uuid.uuid4().hex[:12]}"


async def test_replace_takes_the_new_payload_until_reserved(c: SeppClient) -> None:
    k = key()
    first = await c.enqueue(EnqueueRequest("replace-q", "sync", payload=b"A", idempotency_key=k))
    assert not first.deduplicated and not first.replaced

    second = await c.enqueue(EnqueueRequest("replace-q", "sync", payload=b"B", idempotency_key=k, priority=3))
    assert second.deduplicated and second.replaced and second.job_id == first.job_id
    assert second.original_enqueued_at is not None
    job = await c.get_job(first.job_id)
    assert job.payload == b"B" and job.priority == 3 and job.state is JobState.AVAILABLE
    # The record took B's fingerprint: B again is no mismatch.
    same = await c.enqueue(EnqueueRequest("replace-q", "sync", payload=b"B", idempotency_key=k, priority=3))
    assert same.deduplicated and same.job_id == first.job_id and not same.payload_mismatch

    reserved = await c.reserve("replace-q", wait=5)
    assert [r.job.job_id for r in reserved] == [first.job_id]
    assert reserved[0].job.payload == b"B"

    late = await c.enqueue(EnqueueRequest("replace-q", "sync", payload=b"C", idempotency_key=k))
    assert late.deduplicated and not late.replaced and late.job_id == first.job_id
    assert late.payload_mismatch
    job = await c.get_job(first.job_id)
    assert job.payload == b"B" and job.state is JobState.RESERVED
    await c.complete(first.job_id, reserved[0].lease_token)


async def test_debounce_replaces_and_pushes_run_at_back(c: SeppClient) -> None:
    k = key()
    first = await c.enqueue(EnqueueRequest("debounce-q", "digest", payload=b"A", idempotency_key=k))
    assert not first.deduplicated and not first.replaced
    # A new job on a debounce queue waits debounce_ms too.
    before_job = await c.get_job(first.job_id)
    assert before_job.state is JobState.SCHEDULED
    assert before_job.run_at is not None and before_job.created_at is not None
    assert before_job.run_at == before_job.created_at + DEBOUNCE

    before = datetime.now(timezone.utc)
    second = await c.enqueue(EnqueueRequest("debounce-q", "digest", payload=b"B", idempotency_key=k))
    after = datetime.now(timezone.utc)
    assert second.deduplicated and second.replaced and second.job_id == first.job_id

    job = await c.get_job(first.job_id)
    assert job.payload == b"B" and job.state is JobState.SCHEDULED
    assert job.run_at is not None and job.created_at is not None
    slack = timedelta(milliseconds=5)  # the server's clock is this one's; times are kept to the microsecond
    assert job.run_at > after
    assert before + DEBOUNCE - slack <= job.run_at <= after + DEBOUNCE + slack, (before, job.run_at, after)
    # Not past first enqueue + debounce_max_wait_ms.
    assert job.run_at <= job.created_at + timedelta(milliseconds=120000)


async def test_debounce_never_past_max_wait(c: SeppClient) -> None:
    k = key()
    first = await c.enqueue(EnqueueRequest("capped-q", "digest", payload=b"A", idempotency_key=k))
    second = await c.enqueue(EnqueueRequest("capped-q", "digest", payload=b"B", idempotency_key=k))
    assert second.deduplicated and second.replaced and second.job_id == first.job_id
    job = await c.get_job(first.job_id)
    assert job.payload == b"B" and job.run_at is not None and job.created_at is not None
    # now + debounce_ms (60 s) is past first enqueue + debounce_max_wait_ms (1 s): capped there.
    assert abs(job.run_at - (job.created_at + timedelta(milliseconds=1000))) < timedelta(milliseconds=1), job


async def test_replace_within_one_batch(c: SeppClient) -> None:
    k = key()
    results = await c.enqueue_batch(
        [
            EnqueueRequest("replace-q", "sync", payload=b"A", idempotency_key=k),
            EnqueueRequest("replace-q", "sync", payload=b"B", idempotency_key=k),
        ]
    )
    a, b = results[0].unwrap(), results[1].unwrap()
    assert not a.deduplicated and not a.replaced
    assert b.deduplicated and b.replaced and b.job_id == a.job_id
    assert (await c.get_job(a.job_id)).payload == b"B"


async def test_reject_names_the_original(c: SeppClient) -> None:
    k = key()
    first = await c.enqueue(EnqueueRequest("reject-q", "charge", payload=b"A", idempotency_key=k))
    assert not first.deduplicated
    with pytest.raises(sepp.DuplicateJobError) as info:
        await c.enqueue(EnqueueRequest("reject-q", "charge", payload=b"A", idempotency_key=k))
    err = info.value
    assert err.reason == "DUPLICATE_JOB" and err.code == "already_exists"
    assert err.metadata.get("job_id") == first.job_id
    assert first.job_id in err.message and 'on_duplicate = "reject"' in err.message
    # Nothing written, no hit counted.
    look = await c.lookup_idempotency_key("reject-q", k)
    assert look.found and look.job_id == first.job_id and look.hits == 0


async def test_require_key(c: SeppClient) -> None:
    with pytest.raises(sepp.IdempotencyKeyRequiredError) as info:
        await c.enqueue(EnqueueRequest("need-key", "charge", payload=b"{}"))
    err = info.value
    assert err.reason == "IDEMPOTENCY_KEY_REQUIRED" and err.code == "invalid_argument"
    assert '"need-key"' in err.message and "require_key = true" in err.message
    ack = await c.enqueue(EnqueueRequest("need-key", "charge", payload=b"{}", idempotency_key=key()))
    assert not ack.deduplicated


async def test_key_fields_the_ack_says_the_derived_key(c: SeppClient) -> None:
    account = f"acc-{uuid.uuid4().hex[:8]}"
    payload = f'{{"account":"{account}","amount":100,"note":"first"}}'.encode()
    ack = await c.enqueue(EnqueueRequest("fields-q", "move", payload=payload))
    assert not ack.deduplicated and ack.dedup_expires_at is not None

    # The server says the key it derived: the canonical JSON of the fields.
    k = ack.idempotency_key
    assert k == f'["{account}",100]'
    job = await c.get_job(ack.job_id)
    assert job.idempotency_key == k
    look = await c.lookup_idempotency_key("fields-q", k)
    assert look.found and look.job_id == ack.job_id and look.idempotency_key == k
    assert 'key_fields=["/account","/amount"]' in look.policy, look.policy

    # Other members, another order, 1e2 for 100: the same key, a hit.
    again = await c.enqueue(
        EnqueueRequest("fields-q", "move", payload=f'{{"amount":1e2,"account":"{account}"}}'.encode())
    )
    assert again.deduplicated and again.job_id == ack.job_id and again.payload_mismatch
    assert again.idempotency_key == k

    # Not a JSON object: INVALID_FIELD on the payload itself (pointer "").
    with pytest.raises(sepp.InvalidFieldError) as info:
        await c.enqueue(EnqueueRequest("fields-q", "move", payload=b"[1,2]"))
    err = info.value
    assert err.reason == "INVALID_FIELD" and err.code == "invalid_argument"
    assert err.metadata.get("pointer") == "" and err.metadata.get("field") == "payload"
    assert err.message.startswith("payload: is an array, not a JSON object"), err.message

    # A missing field: the message and the metadata name its pointer.
    with pytest.raises(sepp.InvalidFieldError) as info:
        await c.enqueue(EnqueueRequest("fields-q", "move", payload=b'{"account":"acc-1"}'))
    err = info.value
    assert err.metadata.get("pointer") == "/amount"
    assert err.message.startswith('field "/amount": not in the payload'), err.message


async def test_lookup_and_release_by_payload(c: SeppClient) -> None:
    account = f"acc-{uuid.uuid4().hex[:8]}"
    payload = f'{{"account":"{account}","amount":250}}'
    ack = await c.enqueue(EnqueueRequest("fields-q", "move", payload=payload))

    # Another spelling of the same fields finds the same record; a str
    # payload is sent as its UTF-8.
    look = await c.lookup_idempotency_key_by_payload("fields-q", f'{{"amount":2.5e2,"account":"{account}","x":1}}')
    assert look.found and look.job_id == ack.job_id and look.hits == 0
    assert look.idempotency_key == ack.idempotency_key == f'["{account}",250]'

    other = await c.lookup_idempotency_key_by_payload("fields-q", f'{{"account":"{account}","amount":251}}'.encode())
    assert not other.found and other.idempotency_key == f'["{account}",251]'

    rel = await c.release_idempotency_key_by_payload("fields-q", payload.encode())
    assert rel.released and rel.job_id == ack.job_id and rel.idempotency_key == ack.idempotency_key
    assert not (await c.lookup_idempotency_key("fields-q", ack.idempotency_key or "")).found
    again = await c.release_idempotency_key_by_payload("fields-q", payload)
    assert not again.released and again.idempotency_key == ack.idempotency_key
    fresh = await c.enqueue(EnqueueRequest("fields-q", "move", payload=payload))
    assert not fresh.deduplicated and fresh.job_id != ack.job_id

    # A payload that gives no key: the enqueue's INVALID_FIELD, naming the field.
    with pytest.raises(sepp.InvalidFieldError) as info:
        await c.lookup_idempotency_key_by_payload("fields-q", b'{"account":"acc-1"}')
    assert info.value.metadata.get("pointer") == "/amount"
    # A queue without key_fields has no key to derive: refused.
    with pytest.raises(sepp.InvalidFieldError):
        await c.lookup_idempotency_key_by_payload("reject-q", payload)
    with pytest.raises(sepp.InvalidFieldError):
        await c.release_idempotency_key_by_payload("reject-q", payload)


async def test_the_ack_says_the_given_key_and_none_without(c: SeppClient) -> None:
    k = key()
    assert (await c.enqueue(EnqueueRequest("reject-q", "charge", idempotency_key=k))).idempotency_key == k
    assert (await c.enqueue(EnqueueRequest("replace-q", "sync", payload=b"{}"))).idempotency_key is None
    results = await c.enqueue_batch(
        [EnqueueRequest("fields-q", "move", payload=b'{"account":"b","amount":1}'), EnqueueRequest("replace-q", "sync")]
    )
    assert [r.unwrap().idempotency_key for r in results] == ['["b",1]', None]


async def test_rule_refuses_the_same_fields_under_another_key(c: SeppClient) -> None:
    account = f"acc-{uuid.uuid4().hex[:8]}"
    payload = f'{{"account":"{account}","amount":100}}'.encode()
    k1 = key()
    first = await c.enqueue(EnqueueRequest("rule-q", "charge", payload=payload, idempotency_key=k1))
    assert not first.deduplicated
    # A retry of the first job's own key is a hit, not judged by the rule.
    retry = await c.enqueue(EnqueueRequest("rule-q", "charge", payload=payload, idempotency_key=k1))
    assert retry.deduplicated and retry.job_id == first.job_id
    with pytest.raises(sepp.DedupRuleViolatedError) as info:
        await c.enqueue(EnqueueRequest("rule-q", "charge", payload=payload, idempotency_key=key()))
    err = info.value
    assert err.reason == "DEDUP_RULE_VIOLATED" and err.code == "failed_precondition"
    assert err.metadata.get("rule") == "same-amount"
    assert err.metadata.get("job_id") == first.job_id
    assert err.metadata.get("frees_at"), err.metadata
    assert 'rule "same-amount"' in err.message and first.job_id in err.message
    # Another amount is another request.
    other = await c.enqueue(
        EnqueueRequest("rule-q", "charge", payload=f'{{"account":"{account}","amount":101}}'.encode(), idempotency_key=key())
    )
    assert not other.deduplicated and other.job_id != first.job_id


async def test_reject_in_batches(c: SeppClient) -> None:
    k0, k1 = key(), key()
    results = await c.enqueue_batch(
        [
            EnqueueRequest("reject-q", "charge", idempotency_key=k0),
            EnqueueRequest("reject-q", "charge", idempotency_key=k0),  # repeats item 0
            EnqueueRequest("reject-q", "charge", idempotency_key=k1),
        ]
    )
    assert len(results) == 3
    assert results[0].ok and results[0].ack and not results[0].ack.deduplicated
    assert results[2].ok and results[2].ack and not results[2].ack.deduplicated
    err = results[1].error
    assert isinstance(err, sepp.DuplicateJobError), results[1]
    assert err.reason == "DUPLICATE_JOB" and err.code == "already_exists"
    assert err.metadata.get("job_id") == results[0].ack.job_id
    with pytest.raises(sepp.DuplicateJobError):
        results[1].unwrap()

    # Atomic, the duplicate inside the batch: fails at index 1, writes nothing.
    k2, k3 = key(), key()
    with pytest.raises(sepp.DuplicateJobError) as info:
        await c.enqueue_batch(
            [
                EnqueueRequest("reject-q", "charge", idempotency_key=k2),
                EnqueueRequest("reject-q", "charge", idempotency_key=k2),
                EnqueueRequest("reject-q", "charge", idempotency_key=k3),
            ],
            atomic=True,
        )
    assert info.value.index == 1 and info.value.reason == "DUPLICATE_JOB"
    assert info.value.message.startswith("jobs[1]: "), info.value.message
    # The original is item 0, never written: named by its index, not an id.
    assert info.value.metadata.get("original_index") == "0", info.value.metadata
    assert "job_id" not in info.value.metadata
    for k in (k2, k3):
        assert not (await c.lookup_idempotency_key("reject-q", k)).found

    # Atomic, the duplicate of a job written before: its index, the original.
    with pytest.raises(sepp.DuplicateJobError) as info:
        await c.enqueue_batch(
            [
                EnqueueRequest("reject-q", "charge", idempotency_key=k3),
                EnqueueRequest("reject-q", "charge", idempotency_key=k1),
            ],
            atomic=True,
        )
    assert info.value.index == 1
    assert info.value.metadata.get("job_id") == results[2].ack.job_id
    assert not (await c.lookup_idempotency_key("reject-q", k3)).found
