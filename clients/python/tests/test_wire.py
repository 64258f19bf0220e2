"""The Connect JSON details the client decodes itself: the binary
google.rpc.ErrorInfo of an error, base64 and timestamps (table tests of pure
functions; everything else is tested against a real server)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import sepp
from sepp import _wire
from sepp.errors import error_for


def test_error_info_is_decoded_from_its_binary_value() -> None:
    # From docs/errors.md: a real server's answer to an atomic batch whose
    # item 1 had an empty key (base64 without padding).
    value = "ChVJREVNUE9URU5DWV9LRVlfRU1QVFkSCHNlcHAuZGV2GgoKBWluZGV4EgEx"
    assert _wire.decode_error_info(_wire.b64decode(value)) == ("IDEMPOTENCY_KEY_EMPTY", "sepp.dev", {"index": "1"})
    details = [{"type": "google.rpc.ErrorInfo", "value": value, "debug": {"reason": "WRONG"}}]
    assert _wire.error_info_from_details(details) == ("IDEMPOTENCY_KEY_EMPTY", "sepp.dev", {"index": "1"})


def test_error_info_falls_back_to_debug_json() -> None:
    details = [{"type": "google.rpc.ErrorInfo", "debug": {"reason": "UNKNOWN_QUEUE", "domain": "sepp.dev", "metadata": {"queue": "x"}}}]
    assert _wire.error_info_from_details(details) == ("UNKNOWN_QUEUE", "sepp.dev", {"queue": "x"})
    assert _wire.error_info_from_details([{"type": "other"}]) is None
    assert _wire.error_info_from_details(None) is None


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


def test_base64_and_timestamps() -> None:
    for data in (b"", b"\x00\xff" * 7, bytes(range(256))):
        enc = _wire.b64encode(data)
        assert _wire.b64decode(enc) == data and _wire.b64decode(enc.rstrip("=")) == data
    assert _wire.b64decode("-_8") == b"\xfb\xff"  # URL-safe alphabet
    when = datetime(2024, 5, 1, 12, 30, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    text = _wire.format_timestamp(when)
    assert text == "2024-05-01T10:30:00.123456Z"
    assert _wire.parse_timestamp(text) == when
    assert _wire.parse_timestamp("2024-05-01T10:30:00.123456789Z") == when
    assert _wire.parse_timestamp(None) is None
