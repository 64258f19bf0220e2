"""The Idempotency-Key middleware (``sepp.idempotency``) in front of a FastAPI
app served by uvicorn on a real port, against a real Sepp server: replays
with Idempotent-Replayed, 409 in flight, 422 on another body, 400 when the
key is required and missing or invalid, a 500 or an exception releases the
key, two app processes sharing a key run the handler once, and a Go app
(the Go middleware) and a Python app sharing a scope replay each other's
answers with the same problem bodies."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import httpx
import pytest

from sepp import SeppClient
from sepp.idempotency import _go_json
from sepp_server import CLIENT_DIR, REPO_ROOT, SeppServer, free_port

HERE = Path(__file__).resolve().parent


class AppProcess:
    """One app process listening on a free loopback port: uvicorn serving
    idem_app.py, or the Go app."""

    def __init__(self, cmd: List[str], env: Dict[str, str], port: int, cwd: Path, ready: str = "/state") -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited with {self.proc.returncode}:\n{self.output()}")
            try:
                if httpx.get(self.url + ready, timeout=1).status_code < 500:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the app on {self.url} did not answer in time:\n{self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


_go_app: Optional[str] = None
_go_lock = threading.Lock()


def go_app_binary() -> str:
    """The Go app (tests/testdata/goapp), built once per session."""
    global _go_app
    with _go_lock:
        if _go_app is None:
            out = Path(tempfile.mkdtemp(prefix="sepp-py-goapp-")) / "goapp"
            subprocess.run(["go", "build", "-o", str(out), "./clients/python/tests/testdata/goapp"],
                           cwd=REPO_ROOT, check=True)
            _go_app = str(out)
        return _go_app


@pytest.fixture
def start_app(server: SeppServer) -> Iterator[Callable[..., AppProcess]]:
    """Starts app processes against the shared Sepp server: ``start_app(scope)``
    a uvicorn process serving idem_app.py, ``start_app(scope, go=True)`` the
    Go app; stops them at the end of the test."""
    started: List[AppProcess] = []

    def start(scope: str, *, go: bool = False, lease: float = 30.0) -> AppProcess:
        port = free_port()
        if go:
            app = AppProcess([go_app_binary(), server.url, f"127.0.0.1:{port}", scope], dict(os.environ), port, HERE)
        else:
            env = dict(os.environ, SEPP_ADDR=server.url, IDEM_SCOPE=scope, IDEM_LEASE=str(lease),
                       PYTHONPATH=os.pathsep.join([str(CLIENT_DIR / "src"), str(HERE)]))
            app = AppProcess(
                [sys.executable, "-m", "uvicorn", "idem_app:app", "--host", "127.0.0.1", "--port", str(port),
                 "--log-level", "warning"],
                env, port, HERE,
            )
        started.append(app)
        return app

    yield start
    for app in started:
        app.stop()


def new_scope() -> str:
    return f"api.orders.{uuid.uuid4().hex[:12]}"


async def post(url: str, key: Optional[str], body: bytes, path: str = "/orders") -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(url + path, content=body, headers=headers)


async def control(app: AppProcess, **change: Any) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        (await http.put(app.url + "/control", json=change)).raise_for_status()


async def app_state(app: AppProcess) -> Dict[str, Any]:
    async with httpx.AsyncClient(timeout=10) as http:
        return (await http.get(app.url + "/state")).json()  # type: ignore[no-any-return]


def assert_problem(resp: httpx.Response, status: int, reason: str) -> None:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == "application/problem+json"
    doc = resp.json()
    assert doc["status"] == status and doc["reason"] == reason and doc["type"] == "about:blank", doc
    assert resp.text.endswith("\n")


async def test_replay_reuse_required_invalid_and_pass_through(start_app: Callable[..., AppProcess]) -> None:
    app = start_app(new_scope())
    first = await post(app.url, "order-1", b'{"sku":"a"}')
    assert first.status_code == 201, first.text
    assert "idempotent-replayed" not in first.headers and first.headers["x-not-stored"] == "1"
    assert first.json() == {"order": 1, "app": "python", "request": '{"sku":"a"}'}

    again = await post(app.url, "order-1", b'{"sku":"a"}')
    assert again.status_code == 201 and again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["location"] == "/orders/1"
    assert again.headers["content-type"] == "application/json"
    assert "x-not-stored" not in again.headers
    assert (await app_state(app))["runs"] == 1

    assert_problem(await post(app.url, "order-1", b'{"sku":"b"}'), 422, "IDEMPOTENCY_KEY_REUSED")
    assert_problem(await post(app.url, None, b'{"sku":"a"}'), 400, "IDEMPOTENCY_KEY_REQUIRED")
    assert_problem(await post(app.url, "k" * 257, b"{}"), 400, "IDEMPOTENCY_KEY_INVALID")
    assert (await app_state(app))["runs"] == 1

    async with httpx.AsyncClient(timeout=10) as http:
        listed = await http.get(app.url + "/orders")  # GET passes through
    assert listed.status_code == 200 and listed.json() == {"orders": 1}


async def test_in_flight_is_409_then_replayed(start_app: Callable[..., AppProcess]) -> None:
    app = start_app(new_scope())
    await control(app, gated=True)
    first = asyncio.create_task(post(app.url, "order-2", b"{}"))
    deadline = time.monotonic() + 30
    while (await app_state(app))["entered"] < 1:  # the first request holds the key and runs
        assert time.monotonic() < deadline, "the handler did not start"
        await asyncio.sleep(0.02)
    assert_problem(await post(app.url, "order-2", b"{}"), 409, "IDEMPOTENCY_KEY_IN_FLIGHT")
    await control(app, open=True)
    done = await first
    assert done.status_code == 201 and "idempotent-replayed" not in done.headers
    after = await post(app.url, "order-2", b"{}")
    assert after.headers["idempotent-replayed"] == "true" and after.content == done.content
    assert (await app_state(app))["runs"] == 1


async def test_a_500_or_an_exception_releases_the_key(start_app: Callable[..., AppProcess]) -> None:
    app = start_app(new_scope())
    await control(app, fail=True)
    failed = await post(app.url, "order-3", b"{}")
    assert failed.status_code == 500 and failed.text == "database down"
    await control(app, fail=False)
    await control(app, **{"raise": True})
    broke = await post(app.url, "order-3", b"{}")  # Starlette's error middleware answers 500
    assert broke.status_code == 500 and "idempotent-replayed" not in broke.headers
    await control(app, **{"raise": False})
    retry = await post(app.url, "order-3", b"{}")
    assert retry.status_code == 201 and "idempotent-replayed" not in retry.headers, retry.text
    assert (await app_state(app))["runs"] == 1 and (await app_state(app))["entered"] == 3
    again = await post(app.url, "order-3", b"{}")
    assert again.headers["idempotent-replayed"] == "true" and again.content == retry.content


async def test_two_app_processes_sharing_a_key_run_the_handler_once(start_app: Callable[..., AppProcess]) -> None:
    scope = new_scope()
    a, b = start_app(scope), start_app(scope)
    for app in (a, b):
        await control(app, delay=0.3)  # long enough for the others to arrive while it runs
    answers = await asyncio.gather(*(post((a, b)[i % 2].url, "order-4", b'{"sku":"x"}') for i in range(16)))
    statuses = sorted(r.status_code for r in answers)
    assert set(statuses) <= {201, 409}, [(r.status_code, r.text) for r in answers]
    created = [r for r in answers if r.status_code == 201]
    assert created and len({r.content for r in created}) == 1
    runs = (await app_state(a))["runs"] + (await app_state(b))["runs"]
    assert runs == 1
    # Afterwards both processes replay the one stored answer.
    for app in (a, b):
        r = await post(app.url, "order-4", b'{"sku":"x"}')
        assert r.status_code == 201 and r.headers["idempotent-replayed"] == "true" and r.content == created[0].content
    assert (await app_state(a))["runs"] + (await app_state(b))["runs"] == 1


async def test_go_and_python_apps_share_records(start_app: Callable[..., AppProcess], client: SeppClient) -> None:
    scope = new_scope()
    go, py = start_app(scope, go=True), start_app(scope)

    # Go stores, Python replays.
    first = await post(go.url, "order-go", b'{"sku":"g"}')
    assert first.status_code == 201 and b'"app":"go"' in first.content
    replayed = await post(py.url, "order-go", b'{"sku":"g"}')
    assert replayed.status_code == 201 and replayed.content == first.content
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.headers["location"] == first.headers["location"]
    assert replayed.headers["content-type"] == "application/json"

    # Python stores, Go replays.
    first = await post(py.url, "order-py", b'{"sku":"p"}')
    assert first.status_code == 201 and b'"app":"python"' in first.content
    replayed = await post(go.url, "order-py", b'{"sku":"p"}')
    assert replayed.status_code == 201 and replayed.content == first.content
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.headers["location"] == first.headers["location"] == "/orders/1"

    assert (await app_state(go))["runs"] == 1 and (await app_state(py))["runs"] == 1

    # The records are one format: Python writes the Go record's content to
    # the same bytes (Go's escapes of & < > included).
    go_record = (await client.get_effect(scope, "order-go")).result
    assert b"\\u0026" in go_record and _go_json(json.loads(go_record)).encode() == go_record
    assert json.loads((await client.get_effect(scope, "order-py")).result).keys() == json.loads(go_record).keys()

    # The same problems, to the byte.
    for key, body, status, reason in [
        ("order-go", b'{"sku":"other"}', 422, "IDEMPOTENCY_KEY_REUSED"),
        (None, b"{}", 400, "IDEMPOTENCY_KEY_REQUIRED"),
        ("k" * 257, b"{}", 400, "IDEMPOTENCY_KEY_INVALID"),
    ]:
        from_go, from_py = await post(go.url, key, body), await post(py.url, key, body)
        assert_problem(from_go, status, reason)
        assert_problem(from_py, status, reason)
        assert from_py.content == from_go.content


def test_documentation_example(server: SeppServer) -> None:
    """examples/fastapi_orders.py, the example of the documentation page,
    unchanged, served by uvicorn: a retry is replayed, another body is 422,
    no key is 400."""
    port = free_port()
    env = dict(os.environ, SEPP_ADDR=server.url, PYTHONPATH=str(CLIENT_DIR / "src"))
    app = AppProcess([sys.executable, "-m", "uvicorn", "fastapi_orders:app", "--port", str(port)], env, port,
                     CLIENT_DIR / "examples", ready="/docs")
    try:
        key = {"Idempotency-Key": f"checkout-{uuid.uuid4()}"}
        first = httpx.post(app.url + "/orders", json={"sku": "book-42"}, headers=key)
        assert first.status_code == 201 and first.json()["sku"] == "book-42"
        assert first.headers["location"] == "/orders/" + first.json()["id"]
        again = httpx.post(app.url + "/orders", json={"sku": "book-42"}, headers=key)
        assert again.status_code == 201 and again.content == first.content
        assert again.headers["idempotent-replayed"] == "true" and again.headers["location"] == first.headers["location"]
        assert_problem(httpx.post(app.url + "/orders", json={"sku": "book-43"}, headers=key), 422,
                       "IDEMPOTENCY_KEY_REUSED")
        assert_problem(httpx.post(app.url + "/orders", json={"sku": "book-42"}), 400, "IDEMPOTENCY_KEY_REQUIRED")
    finally:
        app.stop()
