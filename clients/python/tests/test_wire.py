"""What the client makes of the wire besides the generated messages: the
binary google.rpc.ErrorInfo of a Connect error, the class per reason,
timestamps, and the client's enums against the generated ones (table tests
of pure functions; everything else is tested against a real server)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import sepp
from sepp import _wire
from sepp.errors import error_for
from sepp.v1 import effect_pb2, job_pb2

# From docs/errors.md: a real server's answer to an atomic batch whose item 1
# had an empty key (base64 without padding).
EMPTY_KEY_INFO = "ChVJREVNUE9URU5DWV9LRVlfRU1QVFkSCHNlcHAuZGV2GgoKBWluZGV4EgEx"


def test_error_info_is_decoded_from_its_binary_value() -> None:
    want = ("IDEMPOTENCY_KEY_EMPTY", "sepp.dev", {"index": "1"})
    # The binary value wins over the debug JSON, which is only for people.
    details = [{"type": "google.rpc.ErrorInfo", "value": EMPTY_KEY_INFO, "debug": {"reason": "WRONG"}}]
    assert _wire.error_info_from_details(details) == want
    padded = EMPTY_KEY_INFO + "=" * (-len(EMPTY_KEY_INFO) % 4)
    long_type = [{"type": "type.googleapis.com/google.rpc.ErrorInfo", "value": padded}]
    assert _wire.error_info_from_details(long_type) == want


@pytest.mark.parametrize(
    "details",
    [
        None,
        [],
        [{"type": "other", "value": EMPTY_KEY_INFO}],
        [{"type": "google.rpc.ErrorInfo", "debug": {"reason": "UNKNOWN_QUEUE"}}],  # no binary value
        [{"type": "google.rpc.ErrorInfo", "value": "not base64!"}],
        [{"type": "google.rpc.ErrorInfo", "value": "/w"}],  # 0xff: not a message
    ],
)
def test_no_error_info(details: object) -> None:
    assert _wire.error_info_from_details(details) is None


@pytest.mark.parametrize(
    "code,reason,cls",
    [
        ("invalid_argument", "IDEMPOTENCY_KEY_TOO_LONG", sepp.IdempotencyKeyTooLongError),
        ("already_exists", "IDEMPOTENCY_KEY_CONFLICT", sepp.IdempotencyKeyConflictError),
        ("not_found", "UNKNOWN_QUEUE", sepp.UnknownQueueError),
        ("failed_precondition", "LEASE_LOST", sepp.LeaseLostError),
        ("aborted", "EFFECT_IN_PROGRESS", sepp.EffectInProgressError),
        ("deadline_exceeded", "UNAVAILABLE", sepp.UnavailableError),
        ("unavailable", None, sepp.UnavailableError),
        ("not_found", None, sepp.JobNotFoundError),
        ("unimplemented", None, sepp.InternalError),
        ("invalid_argument", "SOMETHING_NEW", sepp.SeppError),
    ],
)
def test_error_class_by_reason(code: str, reason: str, cls: type) -> None:
    err = error_for(code, reason, "msg", {"index": "2"})
    assert type(err) is cls and isinstance(err, sepp.SeppError)
    assert err.code == code and err.message == "msg" and err.index == 2
    assert err.retryable == (cls is sepp.UnavailableError)


def test_batch_item_error() -> None:
    item = job_pb2.BatchItemError(
        code="already_exists", reason="DUPLICATE_JOB", message="m", metadata={"job_id": "j1"}
    )
    err = _wire.item_error(item)
    assert type(err) is sepp.DuplicateJobError and err.metadata == {"job_id": "j1"} and err.message == "m"


def test_timestamps() -> None:
    when = datetime(2024, 5, 1, 12, 30, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    ts = _wire.timestamp(when)
    assert (ts.seconds, ts.nanos) == (1714559400, 123456000)  # 10:30:00.123456 UTC
    job = job_pb2.Job(run_at=ts)
    got = _wire.datetime_of(job, "run_at")
    assert got == when and got is not None and got.tzinfo == timezone.utc
    assert _wire.datetime_of(job, "created_at") is None  # unset, not the epoch
    job.created_at.nanos = 123456789
    assert _wire.datetime_of(job, "created_at") == datetime(1970, 1, 1, 0, 0, 0, 123456, tzinfo=timezone.utc)
    with pytest.raises(ValueError, match="timezone-aware"):
        _wire.timestamp(datetime(2024, 5, 1))


def test_durations() -> None:
    assert _wire.milliseconds(None) == 0
    assert _wire.milliseconds(1.5) == 1500
    assert _wire.milliseconds(timedelta(minutes=2)) == 120000
    assert _wire.seconds(timedelta(milliseconds=250)) == 0.25 and _wire.seconds(None) is None


def test_client_enums_are_the_generated_ones() -> None:
    assert {s.value for s in sepp.JobState} == set(job_pb2.JobState.keys())
    assert {s.value for s in sepp.EffectState} == set(effect_pb2.ClaimOutcome.keys())
    for s in sepp.JobState:
        assert sepp.JobState.parse(s.to_proto()) is s
    assert sepp.JobState.parse(99) is sepp.JobState.UNSPECIFIED  # a state newer than this client
    assert sepp.EffectState.parse(effect_pb2.CLAIM_OUTCOME_COMPLETED) is sepp.EffectState.COMPLETED
    # JobHold's values are the generated names without the prefix, lower
    # case; the zero value (nothing holds the job) and a hold newer than
    # this client read as None.
    assert {"JOB_HOLD_" + h.value.upper() for h in sepp.JobHold} | {"JOB_HOLD_UNSPECIFIED"} == set(
        job_pb2.JobHold.keys()
    )
    for h in sepp.JobHold:
        assert sepp.JobHold.parse(job_pb2.JobHold.Value("JOB_HOLD_" + h.value.upper())) is h
    assert sepp.JobHold.parse(job_pb2.JOB_HOLD_UNSPECIFIED) is None
    assert sepp.JobHold.parse(99) is None
