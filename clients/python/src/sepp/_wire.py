"""Between the generated messages and the client's Python values (internal).

The client speaks the Connect protocol with the binary protobuf codec
(``application/proto``): the messages are those protoc generates from
``proto/sepp/v1`` (:mod:`sepp.v1`), so nothing here knows a field number or
a JSON name. What is left is the few conversions protobuf does not make the
way the client's API wants: aware datetimes in UTC, seconds as floats, and
the reason of a Connect error, whose JSON body carries the binary
``google.rpc.ErrorInfo`` in base64.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping, Optional, Tuple, Union

from google.protobuf import timestamp_pb2
from google.protobuf.message import DecodeError, Message

from ._rpc import error_details_pb2
from .errors import SeppError, error_for
from .v1 import job_pb2

Seconds = Union[float, int, timedelta]

#: The type names a Connect error gives its ErrorInfo detail (connect-go
#: writes the short one; the long one is an Any's type URL).
_ERROR_INFO_TYPES = ("google.rpc.ErrorInfo", "type.googleapis.com/google.rpc.ErrorInfo")


def seconds(value: Optional[Seconds]) -> Optional[float]:
    """Seconds as a float, from a number or a timedelta; None stays None."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


def milliseconds(value: Optional[Seconds]) -> int:
    """Seconds (a number or a timedelta) as whole milliseconds; None is 0."""
    s = seconds(value)
    return 0 if s is None else int(round(s * 1000))


def timestamp(when: datetime) -> timestamp_pb2.Timestamp:
    """An aware datetime as a Timestamp. A naive one is refused: it is
    ambiguous, and protobuf would take it as UTC."""
    if when.tzinfo is None or when.tzinfo.utcoffset(when) is None:
        raise ValueError(
            "run_at must be a timezone-aware datetime, e.g. "
            "datetime.now(timezone.utc) + timedelta(minutes=5); a naive datetime is ambiguous"
        )
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(when.astimezone(timezone.utc))
    return ts


def datetime_of(message: Message, field: str) -> Optional[datetime]:
    """The Timestamp field ``field`` of ``message`` as an aware datetime in
    UTC (nanoseconds cut to microseconds), or None when it is not set."""
    if not message.HasField(field):
        return None
    ts: timestamp_pb2.Timestamp = getattr(message, field)
    return ts.ToDatetime(tzinfo=timezone.utc)


def item_error(err: job_pb2.BatchItemError) -> SeppError:
    """The exception of one item of a batch's answer."""
    return error_for(err.code, err.reason, err.message, dict(err.metadata))


def _b64decode(text: str) -> bytes:
    """Decodes base64 as Connect JSON may carry it: standard or URL-safe,
    with or without padding."""
    padded = text + "=" * (-len(text) % 4)
    altchars = b"-_" if "-" in text or "_" in text else None
    return base64.b64decode(padded, altchars=altchars, validate=True)


def error_info_from_details(details: Any) -> Optional[Tuple[str, str, "dict[str, str]"]]:
    """Finds the ErrorInfo among a Connect error's details and returns its
    (reason, domain, metadata), decoded from the binary value; None when
    there is none, or when its value cannot be decoded (the error then gets
    the reason of its code)."""
    if not isinstance(details, list):
        return None
    for d in details:
        if not isinstance(d, Mapping) or d.get("type") not in _ERROR_INFO_TYPES:
            continue
        value = d.get("value")
        if not isinstance(value, str):
            continue
        try:
            info = error_details_pb2.ErrorInfo.FromString(_b64decode(value))
        except (binascii.Error, ValueError, DecodeError):
            continue
        return info.reason, info.domain, dict(info.metadata)
    return None
