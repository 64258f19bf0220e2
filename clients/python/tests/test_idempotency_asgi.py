"""The Idempotency-Key middleware called as plain ASGI, in the test's own
event loop, against a real Sepp server: what passes through, 413, invalid
keys, fail closed (503 with Retry-After), the stored record's exact form (the
Go middleware's), the problem body's exact form, release on an exception, a
cancellation (a timeout) or an incomplete answer, a large answer sent but
not stored, the lease extended while the handler runs, replay_headers, route
and paths."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

import sepp
from sepp import EffectState, SeppClient
from sepp.idempotency import IdempotencyMiddleware, canonical_header_key, fingerprint
from sepp_server import SeppServer, free_port


@dataclass
class Answer:
    status: int
    headers: List[Tuple[bytes, bytes]]
    body: bytes

    def header(self, name: str) -> Optional[str]:
        for k, v in self.headers:
            if k.decode().lower() == name.lower():
                return v.decode()
        return None

    def problem(self) -> Dict[str, Any]:
        assert self.header("content-type") == "application/problem+json", self
        return json.loads(self.body)  # type: ignore[no-any-return]


@dataclass
class App:
    """A raw ASGI app: reads the body, then answers ``status`` with
    ``body`` (in ``chunks`` parts), after ``delay`` seconds; raises when
    ``error`` is set; returns without answering when ``silent``."""

    status: int = 201
    body: bytes = b'{"ok":true}'
    headers: Sequence[Tuple[bytes, bytes]] = (
        (b"content-type", b"application/json"),
        (b"location", b"/orders/1"),
        (b"x-trace", b"t-1"),
        (b"x-trace", b"t-2"),
    )
    chunks: int = 1
    delay: float = 0.0
    error: Optional[BaseException] = None
    silent: bool = False
    runs: int = 0
    seen: List[bytes] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        self.seen.append(body)
        self.runs += 1
        self.started.set()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        if self.silent:
            return
        await send({"type": "http.response.start", "status": self.status, "headers": list(self.headers)})
        step = max(1, -(-len(self.body) // self.chunks))
        parts = [self.body[i:i + step] for i in range(0, len(self.body), step)] or [b""]
        for i, part in enumerate(parts):
            await send({"type": "http.response.body", "body": part, "more_body": i < len(parts) - 1})


async def call(
    app: Any,
    key: Optional[bytes] = None,
    body: bytes = b"{}",
    *,
    method: str = "POST",
    path: str = "/orders",
    chunks: int = 1,
    disconnect: bool = False,
) -> Answer:
    headers = [(b"host", b"app.test")]
    if key is not None:
        headers.append((b"idempotency-key", key))
    step = max(1, -(-len(body) // chunks))
    parts = [body[i:i + step] for i in range(0, len(body), step)] or [b""]
    messages: List[Dict[str, Any]] = [
        {"type": "http.request", "body": p, "more_body": disconnect or i < len(parts) - 1} for i, p in enumerate(parts)
    ]
    if disconnect:
        messages.append({"type": "http.disconnect"})
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
        "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 80),
    }
    forever = asyncio.Event()

    async def receive() -> Dict[str, Any]:
        if messages:
            return messages.pop(0)
        await forever.wait()
        return {"type": "http.disconnect"}

    sent: List[Dict[str, Any]] = []

    async def send(message: Dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    starts = [m for m in sent if m["type"] == "http.response.start"]
    if not starts:
        return Answer(0, [], b"")
    assert len(starts) == 1, sent
    body_out = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert sent[-1]["type"] == "http.response.body" and not sent[-1].get("more_body"), sent
    return Answer(starts[0]["status"], list(starts[0]["headers"]), body_out)


def new_scope() -> str:
    return f"api.test.{uuid.uuid4().hex[:12]}"


async def test_pass_through(client: SeppClient) -> None:
    inner = App()
    mw = IdempotencyMiddleware(inner, client=client, scope=new_scope())
    assert (await call(mw, None)).status == 201  # no key, not required
    assert (await call(mw, b"k1", method="GET")).status == 201  # not one of the methods
    assert (await call(mw, b"k1", method="PUT")).status == 201
    assert inner.runs == 3
    lifespan_calls = []

    async def lifespan_app(scope: Any, receive: Any, send: Any) -> None:
        lifespan_calls.append(scope["type"])

    await IdempotencyMiddleware(lifespan_app, client=client, scope="s")({"type": "lifespan"}, None, None)
    assert lifespan_calls == ["lifespan"]

    only = IdempotencyMiddleware(inner, client=client, scope=new_scope(), required=True, paths=["/orders"])
    assert (await call(only, None, path="/other")).status == 201
    assert (await call(only, None, path="/orders")).problem()["reason"] == "IDEMPOTENCY_KEY_REQUIRED"
    pred = IdempotencyMiddleware(inner, client=client, scope=new_scope(), required=True,
                                 paths=lambda s: s["path"].startswith("/orders/"))
    assert (await call(pred, None, path="/orders")).status == 201
    assert (await call(pred, None, path="/orders/9/cancel")).status == 400


async def test_key_checks_and_body_limit(client: SeppClient) -> None:
    inner = App()
    mw = IdempotencyMiddleware(inner, client=client, scope=new_scope(), required=True, max_body_bytes=10,
                               header="X-Request-Key")
    missing = await call(mw, None)
    assert missing.status == 400 and missing.problem()["detail"].startswith("this route requires an X-Request-Key header")
    # Empty counts as missing, as in Go.
    assert (await call(mw, b"")).problem()["reason"] == "IDEMPOTENCY_KEY_REQUIRED"
    for bad, n in ((b"k" * 257, 257), ("é".encode() * 129, 258), (b"\xff\xfe", 2)):
        a = await call_with_header(mw, b"x-request-key", bad)
        assert a.status == 400 and a.problem()["reason"] == "IDEMPOTENCY_KEY_INVALID", a
        assert a.problem()["detail"] == f"the X-Request-Key header must be 1 to 256 bytes of UTF-8, got {n} bytes"
    ok256 = await call_with_header(mw, b"x-request-key", "🧾".encode() * 64)  # 256 bytes
    assert ok256.status == 201
    big = await call_with_header(mw, b"x-request-key", b"k-big", body=b"x" * 11, chunks=3)
    assert big.status == 413 and big.problem() == {
        "type": "about:blank", "title": "Request Entity Too Large", "status": 413,
        "detail": "the request body is larger than 10 bytes", "reason": "PAYLOAD_TOO_LARGE",
    }
    exact = await call_with_header(mw, b"x-request-key", b"k-10", body=b"x" * 10, chunks=4)
    assert exact.status == 201 and inner.seen[-1] == b"x" * 10  # the app reads the body it was sent
    gone = await call_with_header(mw, b"x-request-key", b"k-gone", body=b"abc", disconnect=True)
    assert gone.status == 400 and gone.problem()["reason"] == "BODY_UNREADABLE"
    assert inner.runs == 2


async def call_with_header(app: Any, name: bytes, value: bytes, **kw: Any) -> Answer:
    """call() with the key in a header of another name."""

    async def renamed(scope: Any, receive: Any, send: Any) -> None:
        scope["headers"] = [h for h in scope["headers"] if h[0] != b"idempotency-key"] + [(name, value)]
        await app(scope, receive, send)

    return await call(renamed, b"ignored", **kw)


async def test_fails_closed_when_sepp_is_unreachable() -> None:
    inner = App()
    async with SeppClient.connect(f"http://127.0.0.1:{free_port()}", check=False,
                                  retry=sepp.RetryPolicy(max_retries=0)) as c:
        mw = IdempotencyMiddleware(inner, client=c, scope=new_scope())
        a = await call(mw, b"order-1")
    assert a.status == 503 and a.header("retry-after") == "1"
    assert a.problem()["reason"] == "UNAVAILABLE" and inner.runs == 0

    async def no_client_yet() -> None:
        return None

    mw = IdempotencyMiddleware(inner, client=no_client_yet, scope=new_scope())
    assert (await call(mw, b"order-1")).status == 503 and inner.runs == 0


async def test_stored_record_and_problem_are_the_go_forms(client: SeppClient) -> None:
    scope = new_scope()
    inner = App(body=b"<b>&\xe2\x80\xa8</b>")
    mw = IdempotencyMiddleware(inner, client=client, scope=scope,
                               replay_headers=["Content-Type", "location", "X-Trace", "X-Absent"])
    first = await call(mw, b"order-1", b'{"sku":"a"}')
    assert first.status == 201 and first.body == inner.body and first.header("x-trace") == "t-1"
    fp = hashlib.sha256(b'4:POST7:/orders{"sku":"a"}').hexdigest()
    assert fp == fingerprint("POST", "/orders", b'{"sku":"a"}')
    record = await client.get_effect(scope, "order-1")
    assert record.found and record.state is EffectState.COMPLETED
    # What Go's json.Marshal writes for the middleware's stored struct.
    assert record.result == (
        '{"fingerprint":"%s","status":201,"header":{"Content-Type":["application/json"],'
        '"Location":["/orders/1"],"X-Trace":["t-1","t-2"]},"body":"%s"}'
        % (fp, base64.b64encode(inner.body).decode())
    ).encode()
    again = await call(mw, b"order-1", b'{"sku":"a"}')
    assert again.status == 201 and again.body == inner.body and inner.runs == 1
    assert again.headers == [
        (b"content-type", b"application/json"), (b"location", b"/orders/1"), (b"x-trace", b"t-1"),
        (b"x-trace", b"t-2"), (b"idempotent-replayed", b"true"), (b"content-length", b"%d" % len(inner.body)),
    ]
    other = await call(mw, b"order-1", b'{"sku":"b"}')
    # What Go's json.Encoder writes for the problem: keys sorted, a newline.
    assert other.status == 422 and other.body == (
        b'{"detail":"this key was used with another request (method, route or body); use a new key for a new '
        b'request","reason":"IDEMPOTENCY_KEY_REUSED","status":422,"title":"Unprocessable Entity",'
        b'"type":"about:blank"}\n'
    )
    # Another method or route under the key is another request too.
    assert (await call(mw, b"order-1", b'{"sku":"a"}', method="PATCH")).status == 422
    assert (await call(mw, b"order-1", b'{"sku":"a"}', path="/orders/")).status == 422
    # An empty answer stores neither header nor body, as omitempty does.
    empty = App(status=204, body=b"", headers=())
    mw2 = IdempotencyMiddleware(empty, client=client, scope=scope)
    assert (await call(mw2, b"order-2")).status == 204
    assert (await client.get_effect(scope, "order-2")).result == (
        '{"fingerprint":"%s","status":204}' % fingerprint("POST", "/orders", b"{}")).encode()
    replayed = await call(mw2, b"order-2")
    assert replayed.status == 204 and replayed.headers == [(b"idempotent-replayed", b"true")]


async def test_route_names_the_request(client: SeppClient) -> None:
    inner = App()
    mw = IdempotencyMiddleware(inner, client=client, scope=new_scope(), route=lambda s: "POST /orders/{id}")
    await call(mw, b"k", path="/orders/1")
    assert (await call(mw, b"k", path="/orders/2")).header("idempotent-replayed") == "true"
    assert inner.runs == 1


async def test_unreadable_record(client: SeppClient) -> None:
    scope = new_scope()
    claim = await client.claim_effect(scope, "k")
    await client.complete_effect(claim.token, b"not json")
    a = await call(IdempotencyMiddleware(App(), client=client, scope=scope), b"k")
    assert a.status == 500 and a.problem()["reason"] == "IDEMPOTENCY_RECORD_UNREADABLE"


@pytest.mark.parametrize("how", ["5xx", "exception", "timeout", "incomplete"])
async def test_failures_release_the_key(client: SeppClient, how: str) -> None:
    scope = new_scope()
    inner = App()
    mw = IdempotencyMiddleware(inner, client=client, scope=scope)
    if how == "5xx":
        inner.status, inner.body = 503, b"try later"
        a = await call(mw, b"k")
        assert a.status == 503 and a.body == b"try later" and a.header("idempotent-replayed") is None
    elif how == "exception":
        inner.error = ValueError("handler broke")
        with pytest.raises(ValueError, match="handler broke"):
            await call(mw, b"k")
    elif how == "timeout":
        inner.delay = 30
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(call(mw, b"k"), 0.5)
    else:
        inner.silent = True
        assert (await call(mw, b"k")).status == 0  # nothing sent: the server answers 500
    await asyncio.sleep(0.05)  # the shielded release of a cancelled request
    claim = await client.claim_effect(scope, "k")
    assert claim.state is EffectState.ACQUIRED, claim
    await client.release_effect(claim.token)
    inner.status, inner.body, inner.error, inner.delay, inner.silent = 201, b"made", None, 0.0, False
    retry = await call(mw, b"k")
    assert retry.status == 201 and retry.body == b"made" and inner.runs == 2


async def test_a_large_answer_is_sent_not_stored(client: SeppClient) -> None:
    scope = new_scope()
    inner = App(body=b"y" * 100, chunks=7)
    mw = IdempotencyMiddleware(inner, client=client, scope=scope, max_body_bytes=64)
    a = await call(mw, b"k")
    assert a.status == 201 and a.body == b"y" * 100
    assert not (await client.get_effect(scope, "k")).found or (await client.get_effect(scope, "k")).state \
        is not EffectState.COMPLETED
    assert (await call(mw, b"k")).header("idempotent-replayed") is None and inner.runs == 2
    inner.body = b"y" * 64  # at the limit: stored
    await call(mw, b"k2")
    assert (await call(mw, b"k2")).header("idempotent-replayed") == "true" and inner.runs == 3


class _Watched(SeppClient):
    """A client that reports its effect lease extensions."""

    extensions: "asyncio.Queue[Any]"

    async def extend_effect_lease(self, *args: Any, **kwargs: Any) -> Any:
        until = await super().extend_effect_lease(*args, **kwargs)
        self.extensions.put_nowait(until)
        return until


async def test_lease_is_extended_while_the_handler_runs(server: SeppServer) -> None:
    scope = new_scope()
    started, finish = asyncio.Event(), asyncio.Event()

    async def slow(s: Any, receive: Any, send: Any) -> None:
        await receive()
        started.set()
        await finish.wait()
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"done"})

    async with _Watched.connect(server.url) as c:
        assert isinstance(c, _Watched)
        c.extensions = asyncio.Queue()
        mw = IdempotencyMiddleware(slow, client=c, scope=scope, lease=0.6)
        task = asyncio.create_task(call(mw, b"k"))
        await asyncio.wait_for(started.wait(), 10)
        ends = [await asyncio.wait_for(c.extensions.get(), 10) for _ in range(3)]  # past the first lease
        assert ends[0] < ends[1] < ends[2], ends
        assert (await call(mw, b"k")).problem()["reason"] == "IDEMPOTENCY_KEY_IN_FLIGHT"
        finish.set()
        assert (await task).body == b"done"
        assert (await call(mw, b"k")).header("idempotent-replayed") == "true"


async def test_client_function_is_called_once(client: SeppClient) -> None:
    calls = 0

    async def make() -> SeppClient:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return client

    inner = App()
    mw = IdempotencyMiddleware(inner, client=make, scope=new_scope())
    answers = await asyncio.gather(*(call(mw, f"k{i}".encode()) for i in range(5)))
    assert [a.status for a in answers] == [201] * 5 and calls == 1


def test_options_and_helpers() -> None:
    with pytest.raises(ValueError, match="scope is required"):
        IdempotencyMiddleware(App(), client=lambda: None, scope="")  # type: ignore[arg-type,return-value]
    mw = IdempotencyMiddleware(App(), client=lambda: None, scope="s", ttl=0, lease=0, max_body_bytes=0,  # type: ignore
                               header="", methods=[])
    assert (mw.ttl, mw.lease, mw.max_body_bytes, mw.header) == (86400.0, 30.0, 1 << 20, "Idempotency-Key")
    assert mw.methods == {"POST", "PATCH"} and mw.replay_headers == ("Content-Type", "Location")
    assert IdempotencyMiddleware(App(), client=lambda: None, scope="s", replay_headers=[]).replay_headers == ()  # type: ignore
    for given, want in [("content-type", "Content-Type"), ("x-request-id", "X-Request-Id"), ("ETAG", "Etag"),
                        ("x y", "x y"), ("WWW-authenticate", "Www-Authenticate")]:
        assert canonical_header_key(given) == want
