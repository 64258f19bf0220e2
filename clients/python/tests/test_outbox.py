"""The outbox writer (``sepp.outbox``) against a real PostgreSQL, in a schema
of the run's own (its table made by ``sepp outbox schema --dialect
postgres``, the schema dropped at the end): a committed row holds the
request's values, a rolled-back one is absent, a request the server would
refuse raises the client's error with the server's reason and writes
nothing; also through a cursor and psycopg's AsyncConnection, and the ids
are UUIDv7s in the order they were made.

PostgreSQL is ``SEPP_TEST_POSTGRES_URL`` (CI sets it, and there the tests
fail when it cannot be reached), else
``postgres://root@127.0.0.1:5432/test?sslmode=disable``, and the tests skip
when that one does not answer."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Tuple

import pytest

import sepp
from sepp import EnqueueRequest, outbox
from sepp_server import CLIENT_DIR, sepp_binary

if os.environ.get("SEPP_TEST_POSTGRES_URL"):
    import psycopg  # CI: missing is a failure
else:
    psycopg = pytest.importorskip("psycopg")

DEFAULT_URL = "postgres://root@127.0.0.1:5432/test?sslmode=disable"


@pytest.fixture(scope="module")
def pg() -> Iterator[Tuple[str, str]]:
    """(url, table): a schema of this run's own with the outbox table in it."""
    url = os.environ.get("SEPP_TEST_POSTGRES_URL")
    try:
        admin = psycopg.connect(url or DEFAULT_URL, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as err:
        if url:
            raise AssertionError(f"PostgreSQL at SEPP_TEST_POSTGRES_URL cannot be reached: {err}") from err
        pytest.skip(f"no PostgreSQL at {DEFAULT_URL} (set SEPP_TEST_POSTGRES_URL): {err}")
    schema = f"sepp_py_outbox_{uuid.uuid4().hex[:10]}"
    table = f"{schema}.sepp_outbox"
    ddl = subprocess.run([sepp_binary(), "outbox", "schema", "--dialect", "postgres", "--table", table],
                         check=True, capture_output=True, text=True).stdout
    try:
        admin.execute(f"CREATE SCHEMA {schema}")
        for statement in ddl.strip().rstrip(";").split(";\n\n"):
            admin.execute(statement)
        yield url or DEFAULT_URL, table
    finally:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.close()


def rows(url: str, table: str, where: str = "TRUE", params: Tuple[Any, ...] = ()) -> list:
    with psycopg.connect(url) as conn:
        return conn.execute(
            f"SELECT id, queue, job_type, payload, idempotency_key, headers, priority, max_attempts, run_at, "
            f"created_at FROM {table} WHERE {where} ORDER BY id", params,
        ).fetchall()


def count(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_committed_row_holds_the_request(pg: Tuple[str, str]) -> None:
    url, table = pg
    run_at = datetime.now(timezone.utc).replace(microsecond=123456) + timedelta(hours=1)
    payload = bytes(range(256))  # not UTF-8: BYTEA keeps it
    full = EnqueueRequest("emails", "order_confirmation", payload=payload, idempotency_key="order-8a3f.confirm",
                          priority=5, max_attempts=3, run_at=run_at, headers={"trace-id": "4bf9", "tenant": "é<&>"})
    with psycopg.connect(url) as conn:  # one transaction, committed at the end of the block
        conn.execute("CREATE TEMP TABLE orders (id int)")  # the app's own write, in the same transaction
        conn.execute("INSERT INTO orders VALUES (1)")
        full_id = outbox.enqueue(conn, full, table=table)
        bare_id = outbox.enqueue(conn, EnqueueRequest("emails", "ping"), table=table)
    assert uuid.UUID(full_id).version == 7 and full_id < bare_id
    (got,) = rows(url, table, "id = %s", (full_id,))
    assert got[:8] == (full_id, "emails", "order_confirmation", payload, "order-8a3f.confirm",
                       {"trace-id": "4bf9", "tenant": "é<&>"}, 5, 3)
    assert got[8] == run_at and got[9] is not None
    (bare,) = rows(url, table, "id = %s", (bare_id,))
    assert bare[:9] == (bare_id, "emails", "ping", b"", None, None, 0, 0, None)


def test_timedelta_run_at_and_str_payload(pg: Tuple[str, str]) -> None:
    url, table = pg
    with psycopg.connect(url) as conn:
        before = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        row_id = outbox.enqueue(conn, EnqueueRequest("emails", "later", payload='{"é":1}', run_at=timedelta(minutes=5)),
                                table=table)
    (got,) = rows(url, table, "id = %s", (row_id,))
    assert got[3] == '{"é":1}'.encode()
    assert timedelta(minutes=4) < got[8] - before < timedelta(minutes=6)


def test_rolled_back_row_is_absent(pg: Tuple[str, str]) -> None:
    url, table = pg
    with psycopg.connect(url) as conn:
        row_id = outbox.enqueue(conn, EnqueueRequest("emails", "rolled_back"), table=table)
        assert rows(url, table, "id = %s", (row_id,)) == []  # not visible before the commit either
        conn.rollback()
    assert rows(url, table, "id = %s", (row_id,)) == []

    class Refused(Exception):
        pass

    with psycopg.connect(url) as conn:
        with pytest.raises(Refused):
            with conn.transaction():
                row_id = outbox.enqueue(conn, EnqueueRequest("emails", "rolled_back"), table=table)
                raise Refused
    assert rows(url, table, "id = %s", (row_id,)) == []


big_headers = {f"h{i}": "v" for i in range(65)}


@pytest.mark.parametrize(
    "request_,options,error,reason,says",
    [
        (EnqueueRequest("", "t"), {}, sepp.InvalidFieldError, "INVALID_FIELD", "queue: must not be empty"),
        (EnqueueRequest(" emails", "t"), {}, sepp.InvalidFieldError, "INVALID_FIELD", "leading or trailing spaces"),
        (EnqueueRequest("emails\u00a0", "t"), {}, sepp.InvalidFieldError, "INVALID_FIELD", "leading or trailing"),
        (EnqueueRequest("em\u200bails", "t"), {}, sepp.InvalidFieldError, "INVALID_FIELD",
         "invisible format character U+200B at byte 2"),
        (EnqueueRequest("em\x1bails", "t"), {}, sepp.InvalidFieldError, "INVALID_FIELD", "control character U+001B"),
        (EnqueueRequest("q" * 256, "t"), {}, sepp.InvalidFieldError, "INVALID_FIELD", "is 256 bytes; the limit is 255"),
        (EnqueueRequest("emails\ud800", "t"), {}, sepp.InvalidFieldError, "INVALID_FIELD", "not valid UTF-8"),
        (EnqueueRequest("emails", ""), {}, sepp.InvalidFieldError, "INVALID_FIELD", "job_type: is required"),
        (EnqueueRequest("emails", "é" * 128), {}, sepp.InvalidFieldError, "INVALID_FIELD", "job_type: is 256 bytes"),
        (EnqueueRequest("emails", "t", idempotency_key=""), {}, sepp.IdempotencyKeyEmptyError,
         "IDEMPOTENCY_KEY_EMPTY", "idempotency key is empty"),
        (EnqueueRequest("emails", "t", idempotency_key="é" * 129), {}, sepp.IdempotencyKeyTooLongError,
         "IDEMPOTENCY_KEY_TOO_LONG", "is 258 bytes; the limit is 256"),
        (EnqueueRequest("emails", "t", idempotency_key="k" * 11), {"max_idempotency_key_bytes": 10},
         sepp.IdempotencyKeyTooLongError, "IDEMPOTENCY_KEY_TOO_LONG", "the limit is 10"),
        (EnqueueRequest("emails", "t", payload=b"x" * ((1 << 20) + 1)), {}, sepp.PayloadTooLargeError,
         "PAYLOAD_TOO_LARGE", "payload is 1048577 bytes; the limit is 1048576"),
        (EnqueueRequest("emails", "t", payload=b"x" * 11), {"max_payload_bytes": 10}, sepp.PayloadTooLargeError,
         "PAYLOAD_TOO_LARGE", "the limit is 10"),
        (EnqueueRequest("emails", "t", max_attempts=-1), {}, sepp.InvalidFieldError, "INVALID_FIELD",
         "max_attempts: must be >= 0"),
        (EnqueueRequest("emails", "t", priority=1 << 31), {}, sepp.InvalidFieldError, "INVALID_FIELD",
         "priority: 2147483648 does not fit in 32 bits"),
        (EnqueueRequest("emails", "t", headers=big_headers), {}, sepp.InvalidFieldError, "INVALID_FIELD",
         "headers: has 65 entries; the limit is 64"),
        (EnqueueRequest("emails", "t", headers={"big": "v" * (64 << 10)}), {}, sepp.InvalidFieldError,
         "INVALID_FIELD", "headers: are 65539 bytes in all; the limit is 65536"),
        (EnqueueRequest("emails", "t", headers={"k": "\udfff"}), {}, sepp.InvalidFieldError, "INVALID_FIELD",
         'headers: "k" is not valid UTF-8'),
    ],
)
def test_refused_requests_write_nothing(
    pg: Tuple[str, str], request_: EnqueueRequest, options: dict, error: type, reason: str, says: str
) -> None:
    url, table = pg
    before = count(url, table)
    with psycopg.connect(url) as conn:
        with pytest.raises(error) as info:
            outbox.enqueue(conn, request_, table=table, **options)
        assert info.value.reason == reason and says in info.value.message, info.value
        assert isinstance(info.value, sepp.SeppError)
    assert count(url, table) == before


def test_at_the_limits_is_written(pg: Tuple[str, str]) -> None:
    url, table = pg
    at_limits = EnqueueRequest("q" * 255, "t" * 255, idempotency_key="🧾" * 64, payload=b"x" * (1 << 20),
                               max_attempts=0, headers={f"h{i}": "v" for i in range(64)})
    with psycopg.connect(url) as conn:
        row_id = outbox.enqueue(conn, at_limits, table=table)
    assert len(rows(url, table, "id = %s", (row_id,))) == 1


def test_other_refusals(pg: Tuple[str, str]) -> None:
    url, table = pg
    with psycopg.connect(url) as conn:
        for bad in ("sepp outbox", "a.b.c", "x" * 56, "1table", ""):
            with pytest.raises(ValueError, match="plain SQL identifier"):
                outbox.enqueue(conn, EnqueueRequest("emails", "t"), table=bad)
        with pytest.raises(ValueError, match="timezone-aware"):
            outbox.enqueue(conn, EnqueueRequest("emails", "t", run_at=datetime(2030, 1, 1)), table=table)
        with pytest.raises(TypeError):
            outbox.enqueue(conn, ("emails", "t"), table=table)  # type: ignore[arg-type]
    # The table must exist: the driver's error, and the transaction fails.
    with psycopg.connect(url) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable):
            outbox.enqueue(conn, EnqueueRequest("emails", "t"), table=table + "_missing")


def test_through_a_cursor(pg: Tuple[str, str]) -> None:
    url, table = pg
    with psycopg.connect(url) as conn:
        with conn.cursor() as cur:
            row_id = outbox.enqueue(cur, EnqueueRequest("emails", "via_cursor", idempotency_key="c-1"), table=table)
    assert rows(url, table, "id = %s", (row_id,))[0][4] == "c-1"


async def test_async_connection(pg: Tuple[str, str]) -> None:
    url, table = pg
    async with await psycopg.AsyncConnection.connect(url) as conn:
        row_id = await outbox.enqueue_async(conn, EnqueueRequest("emails", "async", headers={"a": "b"}), table=table)
        with pytest.raises(TypeError, match="enqueue_async"):
            outbox.enqueue(conn, EnqueueRequest("emails", "async"), table=table)
    assert rows(url, table, "id = %s", (row_id,))[0][5] == {"a": "b"}
    async with await psycopg.AsyncConnection.connect(url) as conn:
        async with conn.cursor() as cur:
            gone = await outbox.enqueue_async(cur, EnqueueRequest("emails", "async"), table=table)
        await conn.rollback()
    assert rows(url, table, "id = %s", (gone,)) == []


def test_uuid7_ids_sort_in_the_order_made() -> None:
    ids = [outbox.uuid7() for _ in range(10_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    u = uuid.UUID(ids[0])
    assert u.version == 7 and u.variant == uuid.RFC_4122
    ms = int(ids[-1].replace("-", "")[:12], 16)
    assert abs(ms / 1000 - datetime.now(timezone.utc).timestamp()) < 60


def test_example(pg: Tuple[str, str]) -> None:
    """examples/outbox_orders.py, unchanged, against the run's schema (first
    on its search_path, so the default table name is the run's table)."""
    url, table = pg
    schema = table.split(".")[0]
    sep = "&" if "?" in url else "?"
    env = dict(os.environ, PYTHONPATH=str(CLIENT_DIR / "src"),
               APP_DATABASE_URL=f"{url}{sep}options=-csearch_path%3D{schema}")
    before = count(url, table)
    p = subprocess.run([sys.executable, str(CLIENT_DIR / "examples" / "outbox_orders.py")], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "placed, its confirmation is outbox row" in p.stdout and "no row, no job" in p.stdout, p.stdout
    row_id = p.stdout.split("outbox row ")[1].split()[0]
    (got,) = rows(url, table, "id = %s", (row_id,))
    assert got[2] == "order_confirmation" and got[4].startswith("confirm-")
    assert count(url, table) == before + 1
