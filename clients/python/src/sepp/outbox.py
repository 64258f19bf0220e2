"""The outbox writer: write a job as a row of a table in your own PostgreSQL
database, inside your own transaction, for Sepp to relay. The job exists if
and only if the transaction commits::

    import psycopg
    from sepp import EnqueueRequest, outbox

    with psycopg.connect(DATABASE_URL) as conn:   # one transaction, committed at the end of the block
        conn.execute("INSERT INTO orders (id, total) VALUES (%s, %s)", (order_id, total))
        row_id = outbox.enqueue(conn, EnqueueRequest(
            "emails", "order_confirmation", payload=json.dumps({"order": order_id})))

``sepp outbox schema --dialect postgres`` prints the table's DDL; ``sepp
serve`` relays the committed rows of each database named in the config's
``[[outboxes]]`` into jobs and deletes them. A row without an idempotency
key is enqueued with its id as the key.

It is the Python form of the Go writer (package ``outbox``): the same row
(``id`` a UUIDv7, then ``queue``, ``job_type``, ``payload``,
``idempotency_key``, ``headers`` as JSON, ``priority``, ``max_attempts``,
``run_at``), and the same checks before the insert, as the server checks an
enqueue, so a mistake fails the caller's transaction instead of reaching the
dead table later; the errors are the client's (:class:`~sepp.SeppError`
subclasses, with the server's reasons).

:func:`enqueue` writes through a psycopg 3 ``Connection`` or ``Cursor`` (or
any DB-API cursor with the ``%s`` parameter style and PostgreSQL behind it);
:func:`enqueue_async` through a psycopg 3 ``AsyncConnection`` or
``AsyncCursor``. The module imports no database driver itself.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import threading
import time
import unicodedata
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Optional, Tuple

from .errors import IdempotencyKeyEmptyError, IdempotencyKeyTooLongError, InvalidFieldError, PayloadTooLargeError
from .types import EnqueueRequest, payload_bytes

__all__ = [
    "DEFAULT_TABLE",
    "enqueue",
    "enqueue_async",
    "check",
    "check_table",
    "row",
    "uuid7",
]

#: The outbox table's name unless one is configured.
DEFAULT_TABLE = "sepp_outbox"

#: The server's limits that have no config key (internal/config).
MAX_QUEUE_NAME_BYTES = 255
MAX_JOB_TYPE_BYTES = 255
MAX_HEADER_BYTES = 64 << 10
MAX_HEADER_ENTRIES = 64
#: The server's defaults of max_payload_bytes and max_idempotency_key_bytes.
DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20
DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES = 256

_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")

_INT32 = (-(1 << 31), (1 << 31) - 1)

# --- UUIDv7 -----------------------------------------------------------------

_v7_lock = threading.Lock()
_v7_last = 0


def uuid7() -> str:
    """A new UUIDv7 (RFC 9562) as a string, made as the Go writer's
    (google/uuid) are: 48 bits of Unix milliseconds, then 12 bits of the
    sub-millisecond time (so ids made in one process sort in the order they
    were made), then 62 random bits."""
    global _v7_last
    with _v7_lock:
        nano = time.time_ns()
        milli = nano // 1_000_000
        seq = (nano - milli * 1_000_000) >> 8  # 0 to 3906
        now = (milli << 12) + seq
        if now <= _v7_last:
            now = _v7_last + 1
        _v7_last = now
    milli, seq = now >> 12, now & 0xFFF
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (milli << 80) | (0x7 << 76) | (seq << 64) | (0b10 << 62) | rand
    return str(uuid.UUID(int=value))


# --- checks -----------------------------------------------------------------


def check_table(table: str) -> None:
    """Checks that ``table`` is a plain SQL identifier of at most 52
    characters, optionally schema-qualified (``"app.sepp_outbox"``): it is
    spliced into the statement.

    Raises:
        ValueError: it is not.
    """
    if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table) or len(table) > 52:
        raise ValueError(
            f"outbox: table {table!r} must be a plain SQL identifier of at most 52 characters "
            "(letters, digits, _; optionally schema.table)"
        )


def _go_quote(s: str) -> str:
    """s quoted as Go's %+q does: ASCII only, with Go's escapes."""
    out = ['"']
    for c in s:
        n = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif 0x20 <= n < 0x7F:
            out.append(c)
        elif c in "\a\b\f\n\r\t\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}[c])
        elif n < 0x10000:
            out.append(f"\\x{n:02x}" if n < 0x80 else f"\\u{n:04x}")
        else:
            out.append(f"\\U{n:08x}")
    out.append('"')
    return "".join(out)


def _valid_utf8(s: str) -> bool:
    """Whether s encodes as UTF-8 (it holds no lone surrogate)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _utf8_len(s: str) -> int:
    """s's length in bytes of UTF-8, a lone surrogate counted as Go would
    count the three bytes of its (invalid) encoding."""
    return len(s.encode("utf-8", "surrogatepass"))


#: Go's unicode.IsSpace, which strings.TrimSpace trims (str.isspace also
#: counts U+001C to U+001F, which Go does not).
_GO_SPACE = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
                      "\u200a\u2028\u2029\u202f\u205f\u3000")

_INVISIBLE = {
    "Cc": "control character",
    "Cf": "invisible format character",
    "Zl": "line or paragraph separator",
    "Zp": "line or paragraph separator",
}


def _queue_name_error(name: str) -> Optional[str]:
    """The server's rule for queue names (config.CheckQueueName): 1 to 255
    bytes of UTF-8, no leading or trailing spaces, only visible characters.
    None when the name is good."""
    if name == "":
        return "must not be empty"
    n = _utf8_len(name)
    if n > MAX_QUEUE_NAME_BYTES:
        return f"is {n} bytes; the limit is {MAX_QUEUE_NAME_BYTES}"
    if not _valid_utf8(name):
        return "is not valid UTF-8"
    if name[0] in _GO_SPACE or name[-1] in _GO_SPACE:
        return f"{_go_quote(name)} has leading or trailing spaces"
    offset = 0
    for c in name:
        kind = _INVISIBLE.get(unicodedata.category(c))
        if kind:
            return (f"{_go_quote(name)} contains the {kind} U+{ord(c):04X} at byte {offset}; "
                    "names may hold only visible characters")
        offset += len(c.encode("utf-8"))
    return None


def _invalid(field: str, message: str) -> InvalidFieldError:
    return InvalidFieldError(message, metadata={"field": field})


def _int32(field: str, value: Any) -> int:
    """value as an int that fits the column (INTEGER)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, not {type(value).__name__}")
    if not _INT32[0] <= value <= _INT32[1]:
        raise _invalid(field, f"{field}: {value} does not fit in 32 bits")
    return value


def check(
    request: EnqueueRequest,
    *,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    max_idempotency_key_bytes: int = DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES,
) -> None:
    """Checks ``request`` as the Go writer does (the server's enqueue rules
    that do not depend on its config beyond the two limits given).

    Raises:
        InvalidFieldError: a bad queue name, job type, key encoding,
            max_attempts, priority or headers (reason ``INVALID_FIELD``).
        IdempotencyKeyEmptyError: the key is "" (``IDEMPOTENCY_KEY_EMPTY``).
        IdempotencyKeyTooLongError: the key is longer than
            ``max_idempotency_key_bytes`` (``IDEMPOTENCY_KEY_TOO_LONG``).
        PayloadTooLargeError: the payload is larger than
            ``max_payload_bytes`` (``PAYLOAD_TOO_LARGE``).
        TypeError: a field of the wrong type.
        ValueError: ``run_at`` is a naive datetime.
    """
    if not isinstance(request, EnqueueRequest):
        raise TypeError(f"want an EnqueueRequest, not {type(request).__name__}")
    for name in ("queue", "job_type"):
        if not isinstance(getattr(request, name), str):
            raise TypeError(f"{name} must be a str, not {type(getattr(request, name)).__name__}")
    err = _queue_name_error(request.queue)
    if err:
        raise _invalid("queue", f"queue: {err}")
    jt = request.job_type
    if jt == "":
        raise _invalid("job_type", "job_type: is required")
    if _utf8_len(jt) > MAX_JOB_TYPE_BYTES:
        raise _invalid("job_type", f"job_type: is {_utf8_len(jt)} bytes; the limit is {MAX_JOB_TYPE_BYTES}")
    if not _valid_utf8(jt):
        raise _invalid("job_type", "job_type: is not valid UTF-8")
    key = request.idempotency_key
    if key is not None:
        if not isinstance(key, str):
            raise TypeError(f"idempotency_key must be a str or None, not {type(key).__name__}")
        limit = max_idempotency_key_bytes or DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES
        if key == "":
            raise IdempotencyKeyEmptyError(
                "idempotency key is empty (often an unset variable): pass a key derived from what the job is "
                "about, or leave idempotency_key None and the row's id becomes the key",
                metadata={"field": "idempotency_key"},
            )
        if not _valid_utf8(key):
            raise _invalid("idempotency_key", "idempotency_key: is not valid UTF-8; keys are UTF-8 strings")
        if len(key.encode("utf-8")) > limit:
            raise IdempotencyKeyTooLongError(
                f"idempotency key is {len(key.encode('utf-8'))} bytes; the limit is {limit} "
                "(max_idempotency_key_bytes): use a shorter, stable id such as the entity or event id",
                metadata={"field": "idempotency_key"},
            )
    payload = payload_bytes(request.payload)
    max_payload = max_payload_bytes or DEFAULT_MAX_PAYLOAD_BYTES
    if len(payload) > max_payload:
        raise PayloadTooLargeError(
            f"payload is {len(payload)} bytes; the limit is {max_payload} (max_payload_bytes): "
            "store large data elsewhere and enqueue a reference",
            metadata={"field": "payload"},
        )
    if _int32("max_attempts", request.max_attempts) < 0:
        raise _invalid(
            "max_attempts",
            f"max_attempts: must be >= 0 (0 means the queue's max_attempts), got {request.max_attempts}",
        )
    _int32("priority", request.priority)
    headers = request.headers or {}
    if len(headers) > MAX_HEADER_ENTRIES:
        raise _invalid("headers", f"headers: has {len(headers)} entries; the limit is {MAX_HEADER_ENTRIES}")
    size = 0
    for k, v in headers.items():
        k, v = str(k), str(v)
        size += _utf8_len(k) + _utf8_len(v)
        if not _valid_utf8(k) or not _valid_utf8(v):
            raise _invalid("headers", f"headers: {_go_quote(k)} is not valid UTF-8")
    if size > MAX_HEADER_BYTES:
        raise _invalid(
            "headers", f"headers: are {size} bytes in all; the limit is {MAX_HEADER_BYTES}: put large data in the payload"
        )
    if isinstance(request.run_at, datetime) and (
        request.run_at.tzinfo is None or request.run_at.tzinfo.utcoffset(request.run_at) is None
    ):
        raise ValueError(
            "run_at must be a timezone-aware datetime, e.g. "
            "datetime.now(timezone.utc) + timedelta(minutes=5); a naive datetime is ambiguous"
        )
    if request.run_at is not None and not isinstance(request.run_at, (datetime, timedelta)):
        raise TypeError(f"run_at must be a datetime or timedelta, not {type(request.run_at).__name__}")


def row(
    request: EnqueueRequest,
    *,
    table: str = DEFAULT_TABLE,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    max_idempotency_key_bytes: int = DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES,
) -> Tuple[str, Tuple[Any, ...], str]:
    """Checks ``request`` and returns the INSERT of its row: ``(query,
    params, id)``, the query with ``%s`` placeholders. :func:`enqueue` runs
    it; use it to run the insert through another driver."""
    check_table(table)
    check(request, max_payload_bytes=max_payload_bytes, max_idempotency_key_bytes=max_idempotency_key_bytes)
    row_id = uuid7()
    headers: Optional[str] = None
    if request.headers:
        headers = json.dumps({str(k): str(v) for k, v in request.headers.items()}, sort_keys=True,
                             ensure_ascii=False, separators=(",", ":"))
    run_at: Optional[datetime] = None
    if isinstance(request.run_at, timedelta):
        run_at = datetime.now(timezone.utc) + request.run_at
    elif isinstance(request.run_at, datetime):
        run_at = request.run_at
    query = (
        f"INSERT INTO {table} (id, queue, job_type, payload, idempotency_key, headers, priority, max_attempts, run_at) "
        "VALUES (%s, %s, %s, %s, %s, (%s::text)::jsonb, %s, %s, %s)"
    )
    params = (
        row_id,
        request.queue,
        request.job_type,
        payload_bytes(request.payload),
        request.idempotency_key,
        headers,
        int(request.priority),
        int(request.max_attempts),
        run_at,
    )
    return query, params, row_id


def enqueue(
    conn: Any,
    request: EnqueueRequest,
    *,
    table: str = DEFAULT_TABLE,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    max_idempotency_key_bytes: int = DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES,
) -> str:
    """Writes ``request`` as a row of ``table`` through ``conn`` (a psycopg 3
    ``Connection`` or ``Cursor``, in the transaction that makes the job
    true) and returns the row's id, a UUIDv7.

    Args:
        conn: what runs the insert: anything with ``execute(query, params)``
            and the ``%s`` parameter style, on PostgreSQL.
        request: the job, as :meth:`SeppClient.enqueue` takes it.
        table: the outbox table, optionally ``schema.table``. Default
            ``"sepp_outbox"``.
        max_payload_bytes, max_idempotency_key_bytes: the server's limits,
            when changed from their defaults (1 MiB and 256 bytes).

    Raises:
        SeppError: the request is one the server would refuse (see
            :func:`check`); nothing was written.
        ValueError: ``table`` is not a plain identifier.
        Exception: the driver's error when the insert fails.
    """
    query, params, row_id = row(request, table=table, max_payload_bytes=max_payload_bytes,
                                max_idempotency_key_bytes=max_idempotency_key_bytes)
    out = conn.execute(query, params)
    if inspect.isawaitable(out):
        if inspect.iscoroutine(out):
            out.close()  # not sent
        raise TypeError("outbox.enqueue got an async connection or cursor: use await outbox.enqueue_async(...)")
    return row_id


async def enqueue_async(
    conn: Any,
    request: EnqueueRequest,
    *,
    table: str = DEFAULT_TABLE,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    max_idempotency_key_bytes: int = DEFAULT_MAX_IDEMPOTENCY_KEY_BYTES,
) -> str:
    """:func:`enqueue` through a psycopg 3 ``AsyncConnection`` or
    ``AsyncCursor`` (anything whose ``execute(query, params)`` is awaited)."""
    query, params, row_id = row(request, table=table, max_payload_bytes=max_payload_bytes,
                                max_idempotency_key_bytes=max_idempotency_key_bytes)
    await conn.execute(query, params)
    return row_id
