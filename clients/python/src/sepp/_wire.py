"""Connect JSON encoding helpers (internal).

The server speaks the Connect protocol with protojson's mapping of the
messages in ``proto/sepp/v1/*.proto``: lowerCamelCase field names, ``int64``
as strings, ``bytes`` as base64 and ``google.protobuf.Timestamp`` as RFC 3339.
Fields that hold their zero value are left out of the server's answers, so
every reader here takes a default.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping, Optional


def b64encode(data: bytes) -> str:
    """Encodes bytes as protojson does (standard base64, padded)."""
    return base64.b64encode(data).decode("ascii")


def b64decode(text: Optional[str]) -> bytes:
    """Decodes a protojson bytes field: standard or URL-safe base64, with or
    without padding (protojson accepts all four, so the server may too)."""
    if not text:
        return b""
    padded = text + "=" * (-len(text) % 4)
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded)
    except (binascii.Error, ValueError) as exc:  # pragma: no cover - server bug
        raise ValueError(f"not base64: {text[:40]!r}") from exc


def format_timestamp(when: datetime) -> str:
    """Formats an aware datetime as an RFC 3339 UTC timestamp."""
    if when.tzinfo is None or when.tzinfo.utcoffset(when) is None:
        raise ValueError(
            "run_at must be a timezone-aware datetime, e.g. "
            "datetime.now(timezone.utc) + timedelta(minutes=5); a naive datetime is ambiguous"
        )
    utc = when.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + f".{utc.microsecond:06d}Z"


def parse_timestamp(text: Optional[str]) -> Optional[datetime]:
    """Parses an RFC 3339 timestamp (nanoseconds are cut to microseconds).
    Absent or empty: None."""
    if not text:
        return None
    # Python 3.11's fromisoformat takes "Z" and any number of fraction
    # digits (it keeps six).
    return datetime.fromisoformat(text)


def as_int(value: Any, default: int = 0) -> int:
    """Reads an int32 (a JSON number) or int64 (a JSON string) field."""
    if value is None or value == "":
        return default
    return int(value)


def duration_ms(seconds: "float | timedelta | None") -> int:
    """Converts seconds (a float) or a timedelta to whole milliseconds."""
    if seconds is None:
        return 0
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    return int(round(float(seconds) * 1000))


# --- protobuf decoding of google.rpc.ErrorInfo ----------------------------
#
# Connect JSON carries error details as {"type": ..., "value": <base64 of the
# binary message>}. ErrorInfo is small (1: reason, 2: domain, 3: map<string,
# string> metadata), so a minimal wire-format reader decodes it without a
# protobuf dependency.


def _varint(buf: bytes, pos: int) -> "tuple[int, int]":
    """Reads a base-128 varint at pos; returns (value, next position)."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf: bytes) -> "list[tuple[int, int, Any]]":
    """Splits a protobuf message into (field number, wire type, value)."""
    out = []
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
            if pos > len(buf):
                raise ValueError("truncated field")
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def decode_error_info(value: bytes) -> "tuple[str, str, dict[str, str]]":
    """Decodes a binary google.rpc.ErrorInfo into (reason, domain, metadata)."""
    reason, domain, metadata = "", "", {}
    for number, wire, v in _fields(value):
        if wire != 2:
            continue
        if number == 1:
            reason = v.decode("utf-8", "replace")
        elif number == 2:
            domain = v.decode("utf-8", "replace")
        elif number == 3:
            key, val = "", ""
            for n2, w2, v2 in _fields(v):
                if w2 == 2 and n2 == 1:
                    key = v2.decode("utf-8", "replace")
                elif w2 == 2 and n2 == 2:
                    val = v2.decode("utf-8", "replace")
            metadata[key] = val
    return reason, domain, metadata


def error_info_from_details(details: Any) -> "Optional[tuple[str, str, dict[str, str]]]":
    """Finds the ErrorInfo among a Connect error's details: the binary value
    first, the optional ``debug`` JSON as a fallback."""
    if not isinstance(details, list):
        return None
    for d in details:
        if not isinstance(d, Mapping):
            continue
        if d.get("type") not in ("google.rpc.ErrorInfo", "type.googleapis.com/google.rpc.ErrorInfo"):
            continue
        value = d.get("value")
        if isinstance(value, str):
            try:
                return decode_error_info(b64decode(value))
            except ValueError:
                pass
        debug = d.get("debug")
        if isinstance(debug, Mapping):
            meta = debug.get("metadata") or {}
            return str(debug.get("reason", "")), str(debug.get("domain", "")), {str(k): str(v) for k, v in meta.items()}
    return None
