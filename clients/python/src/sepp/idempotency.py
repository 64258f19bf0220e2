"""Idempotency-Key for an app's own HTTP API: ASGI middleware (FastAPI,
Starlette, or any ASGI app) that makes handlers safe to retry, following the
IETF draft "The Idempotency-Key HTTP Header Field". A request that carries an
``Idempotency-Key`` runs its handler once, across any number of app
instances, and its repeats get the stored response::

    from sepp.idempotency import IdempotencyMiddleware

    app.add_middleware(IdempotencyMiddleware, client=lambda: app.state.sepp,
                       scope="api.orders", required=True)

It is the Python form of the Go middleware (package ``idempotency``), with
the same rules and the same records, so Go and Python apps that share a
scope replay each other's answers. The keys are Sepp effect keys (effect
scope ``scope``, effect key the header's value): the first request with a
key claims it, runs the handler and stores its response (status, the
headers ``replay_headers`` names, the body) as the effect's result for
``ttl``. Then:

- a repeat with the same method, route and body gets the stored response,
  with the header ``Idempotent-Replayed: true``, and the handler does not
  run;
- a repeat while the first still runs gets 409 Conflict;
- the same key with another method, route or body gets 422;
- a request without the header on a route that requires one gets 400;
- a handler that answers 5xx or raises (or is cancelled, by a timeout or a
  shutdown) releases the key, so a retry runs it again; 2xx, 3xx and 4xx
  answers are stored.

Errors are ``application/problem+json`` (RFC 9457) with a ``reason`` member.
It fails closed: when Sepp cannot be reached the handler does not run and
the client gets 503 with ``Retry-After: 1``.

The module is pure ASGI: it imports nothing from Starlette or FastAPI.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import inspect
import json
import logging
from typing import (
    Any,
    Awaitable,
    Callable,
    Collection,
    Dict,
    Iterable,
    List,
    MutableMapping,
    Optional,
    Tuple,
    Union,
)

from . import _wire
from ._wire import Seconds
from .client import SeppClient
from .errors import LeaseLostError, SeppError, UnavailableError
from .types import EffectState

__all__ = ["IdempotencyMiddleware", "REPLAYED_HEADER", "fingerprint", "canonical_header_key"]

_log = logging.getLogger("sepp.idempotency")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The header that marks a replayed response.
REPLAYED_HEADER = "Idempotent-Replayed"

#: The longest key accepted, in bytes of UTF-8 (an effect key's limit).
_MAX_KEY_BYTES = 256

#: Go's http.StatusText for the statuses the middleware answers itself, so
#: a problem's title is the same from a Go or a Python app.
_STATUS_TEXT = {
    400: "Bad Request",
    409: "Conflict",
    413: "Request Entity Too Large",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
    503: "Service Unavailable",
}

#: Server extensions that send a response outside http.response.body: the
#: middleware holds the answer until it is stored, so the app must not see
#: them.
_UNBUFFERABLE = ("http.response.pathsend", "http.response.zerocopysend", "http.response.trailers")

ClientSource = Union[SeppClient, Callable[[], Union[SeppClient, Awaitable[SeppClient]]]]


def fingerprint(method: str, route: str, body: bytes) -> str:
    """The request's identity under its key: the hex SHA-256 of the method
    and the route, each prefixed with its length in bytes, then the body (as
    the Go middleware computes it)."""
    m = method.encode("utf-8", "surrogateescape")
    r = route.encode("utf-8", "surrogateescape")
    h = hashlib.sha256()
    h.update(b"%d:%s%d:%s" % (len(m), m, len(r), r))
    h.update(body)
    return h.hexdigest()


def canonical_header_key(name: str) -> str:
    """A header name in Go's canonical form (``http.CanonicalHeaderKey``):
    ``content-type`` becomes ``Content-Type``. A name with a character that
    is not a token character is returned unchanged, as Go does."""
    token = set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    if not name or any(c not in token for c in name):
        return name
    out = []
    upper = True
    for c in name:
        out.append(c.upper() if upper else c.lower())
        upper = c == "-"
    return "".join(out)


def _go_json(value: Any, *, sort_keys: bool = False) -> str:
    """JSON as Go's encoding/json writes it: compact, UTF-8 as is, and <, >,
    &, U+2028 and U+2029 escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)
    for c, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(c, esc)
    return text


async def _problem(
    send: Send, status: int, reason: str, detail: str, headers: Iterable[Tuple[bytes, bytes]] = ()
) -> None:
    """Answers an RFC 9457 problem with a reason member, with the body the
    Go middleware writes (its keys sorted, a newline at the end)."""
    doc = {"type": "about:blank", "title": _STATUS_TEXT.get(status, ""), "status": status, "detail": detail,
           "reason": reason}
    body = (_go_json(doc, sort_keys=True) + "\n").encode("utf-8", "replace")
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/problem+json"), (b"content-length", b"%d" % len(body)),
                    *headers],
    })
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _unavailable(send: Send, err: BaseException) -> None:
    """Answers a failure of Sepp: 500 with the error's reason when Sepp
    answered with one other than UNAVAILABLE, else 503 with Retry-After."""
    if isinstance(err, SeppError) and err.reason != UnavailableError.REASON:
        await _problem(send, 500, err.reason, "the idempotency record could not be used: " + err.message)
        return
    if not isinstance(err, SeppError):
        _log.warning("idempotency: the Sepp client failed: %r", err, exc_info=err)
    await _problem(
        send, 503, UnavailableError.REASON,
        "the idempotency records are unreachable, so the request was not run; retry it with the same key",
        [(b"retry-after", b"1")],
    )


def _has_body(status: int) -> bool:
    """Whether a response of this status carries a body (and so a
    Content-Length)."""
    return status >= 200 and status not in (204, 304)


class _Recorder:
    """The app's send while it runs under a claim: holds the answer (status,
    headers, body) until it is stored. A body that grows past ``limit`` is
    not going to be stored, so from then on it is sent as it comes."""

    def __init__(self, send: Send, limit: int) -> None:
        self._send = send
        self._limit = limit
        self.start: Optional[Message] = None
        self.body = bytearray()
        self.complete = False
        #: The body passed the limit: sent, not stored.
        self.over = False

    async def __call__(self, message: Message) -> None:
        kind = message.get("type")
        if kind == "http.response.start":
            if self.start is not None:
                raise RuntimeError("the app sent http.response.start twice")
            self.start = message
            return
        if kind == "http.response.body":
            if self.start is None:
                raise RuntimeError("the app sent http.response.body before http.response.start")
            if self.complete:
                raise RuntimeError("the app sent http.response.body after the end of the response")
            chunk = bytes(message.get("body", b""))
            more = bool(message.get("more_body", False))
            if not more:
                self.complete = True
            if self.over:
                await self._send({"type": "http.response.body", "body": chunk, "more_body": more})
            elif len(self.body) + len(chunk) > self._limit:
                self.over = True
                head, self.body = bytes(self.body), bytearray()
                await self._send(self.start)
                await self._send({"type": "http.response.body", "body": head + chunk, "more_body": more})
            else:
                self.body += chunk
            return
        await self._send(message)  # informational messages (early hints), if the server has them

    @property
    def status(self) -> int:
        return int(self.start["status"]) if self.start is not None else 0

    def headers(self) -> List[Tuple[bytes, bytes]]:
        return [(bytes(k), bytes(v)) for k, v in (self.start or {}).get("headers", [])]

    async def flush(self) -> None:
        """Sends the held answer."""
        assert self.start is not None
        await self._send(self.start)
        await self._send({"type": "http.response.body", "body": bytes(self.body), "more_body": False})


class IdempotencyMiddleware:
    """ASGI middleware that guards an app's handlers with Sepp effect keys
    (see the module's documentation).

    With FastAPI or Starlette::

        app.add_middleware(IdempotencyMiddleware, client=lambda: app.state.sepp,
                           scope="api.orders", required=True)

    or around any ASGI app: ``app = IdempotencyMiddleware(app, client=client,
    scope="api.orders")``.

    Args:
        app: the ASGI app.
        client: a connected :class:`~sepp.SeppClient`, or a function of no
            arguments that returns one (or an awaitable of one), called at
            the first request that needs it and kept (for a client that the
            app connects at its startup: ``lambda: app.state.sepp``). The
            middleware never closes it.
        scope: the effect scope the keys live under, like ``"api.orders"``:
            keys are unique per scope. Required.
        required: refuse a request without the header with 400. Default
            False: such a request passes through.
        ttl: how long a stored response is replayed, in seconds (or a
            timedelta). Default 24 h.
        header: the request header. Default ``"Idempotency-Key"``.
        methods: the methods the middleware applies to; others pass
            through. Default POST and PATCH.
        max_body_bytes: bounds the request body (read to fingerprint it; a
            larger one gets 413) and the stored response body (a larger
            response is sent, not stored, and its key released). Default
            1 MiB.
        replay_headers: the response headers stored and replayed. Default
            Content-Type and Location.
        lease: how long a claim holds while the handler runs, in seconds; it
            is extended every third of it until the handler returns. Default
            30 s.
        route: names the request's route in its fingerprint, from the ASGI
            scope. Default: the path (``scope["path"]``).
        paths: the requests the middleware applies to, beside ``methods``:
            a collection of paths (``scope["path"]``, exact), or a function of
            the ASGI scope returning True for those it guards. Default: every
            path. (In Go, the middleware wraps the handlers it guards.)

    Zero values (``ttl=0``, ``lease=0``, ``max_body_bytes=0``, ``header=""``,
    empty ``methods``) mean the defaults, as the Go Options' zero values do.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        client: ClientSource,
        scope: str,
        required: bool = False,
        ttl: Seconds = 24 * 3600,
        header: str = "Idempotency-Key",
        methods: Iterable[str] = ("POST", "PATCH"),
        max_body_bytes: int = 1 << 20,
        replay_headers: Optional[Iterable[str]] = None,
        lease: Seconds = 30.0,
        route: Optional[Callable[[Scope], str]] = None,
        paths: Optional[Union[Collection[str], Callable[[Scope], bool]]] = None,
    ) -> None:
        if not isinstance(scope, str) or not scope:
            raise ValueError("IdempotencyMiddleware: scope is required (the effect scope of the keys, like 'api.orders')")
        if len(scope.encode("utf-8")) > _MAX_KEY_BYTES:
            raise ValueError(f"IdempotencyMiddleware: scope is longer than {_MAX_KEY_BYTES} bytes of UTF-8")
        if client is None:
            raise ValueError("IdempotencyMiddleware: client is required (a SeppClient, or a function returning one)")
        self.app = app
        self.scope = scope
        self.required = bool(required)
        self.ttl = _wire.seconds(ttl) or 24 * 3600.0
        self.header = header or "Idempotency-Key"
        self._header_name = self.header.lower().encode("latin-1")
        self.methods = frozenset(methods) or frozenset(("POST", "PATCH"))
        self.max_body_bytes = int(max_body_bytes) or 1 << 20
        self.replay_headers: Tuple[str, ...] = (
            ("Content-Type", "Location") if replay_headers is None else tuple(replay_headers)
        )
        self.lease = _wire.seconds(lease) or 30.0
        self.route: Callable[[Scope], str] = route or (lambda s: str(s.get("path", "")))
        if isinstance(paths, str):
            paths = (paths,)
        self._applies: Callable[[Scope], bool]
        if paths is None:
            self._applies = lambda s: True
        elif callable(paths):
            self._applies = paths
        else:
            wanted = frozenset(paths)
            self._applies = lambda s: s.get("path") in wanted
        self._client_source = client
        self._client: Optional[SeppClient] = client if hasattr(client, "claim_effect") else None  # type: ignore[assignment]
        self._client_lock: Optional[asyncio.Lock] = None

    async def _get_client(self) -> SeppClient:
        """The client, from the function given as ``client`` the first time."""
        if self._client is not None:
            return self._client
        if self._client_lock is None:
            self._client_lock = asyncio.Lock()
        async with self._client_lock:
            if self._client is None:
                made = self._client_source()  # type: ignore[operator]
                if inspect.isawaitable(made):
                    made = await made
                if made is None:
                    raise UnavailableError("the middleware's client function returned None (no client yet)")
                self._client = made
            return self._client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") not in self.methods or not self._applies(scope):
            await self.app(scope, receive, send)
            return
        raw = b""
        for name, value in scope.get("headers", ()):
            if bytes(name).lower() == self._header_name:
                raw = bytes(value)
                break
        if not raw and not self.required:
            await self.app(scope, receive, send)
            return
        if not raw:
            await _problem(
                send, 400, "IDEMPOTENCY_KEY_REQUIRED",
                f"this route requires an {self.header} header: a unique value per operation, like a UUID, "
                "sent again unchanged on every retry",
            )
            return
        key: Optional[str] = None
        if len(raw) <= _MAX_KEY_BYTES:
            try:
                key = raw.decode("utf-8")
            except UnicodeDecodeError:
                key = None
        if key is None:
            await _problem(
                send, 400, "IDEMPOTENCY_KEY_INVALID",
                f"the {self.header} header must be 1 to {_MAX_KEY_BYTES} bytes of UTF-8, got {len(raw)} bytes",
            )
            return

        # The body, read whole (up to the limit) to fingerprint it, and
        # handed to the app as one message.
        chunks: List[bytes] = []
        size = 0
        while True:
            message = await receive()
            kind = message.get("type")
            if kind == "http.disconnect":
                await _problem(send, 400, "BODY_UNREADABLE",
                               "the request body could not be read: the client disconnected before its end")
                return
            if kind != "http.request":
                continue
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > self.max_body_bytes:
                await _problem(send, 413, "PAYLOAD_TOO_LARGE",
                               f"the request body is larger than {self.max_body_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        fp = fingerprint(str(scope["method"]), self.route(scope), body)

        try:
            client = await self._get_client()
            claim = await client.claim_effect(self.scope, key, ttl=self.ttl, lease=self.lease)
        except Exception as err:  # fail closed: the handler does not run
            await _unavailable(send, err)
            return
        if claim.state is EffectState.IN_PROGRESS:
            await _problem(send, 409, "IDEMPOTENCY_KEY_IN_FLIGHT",
                           "a request with this key is still being processed; retry after it completes")
        elif claim.state is EffectState.COMPLETED:
            await _replay(send, claim.result, fp)
        else:
            await self._run(client, scope, receive, send, claim.token, fp, body)

    async def _run(
        self, client: SeppClient, scope: Scope, receive: Receive, send: Send, token: str, fp: str, body: bytes
    ) -> None:
        """Runs the app under the claim token, extending its lease while it
        runs, and stores its answer, or releases the key for a 5xx, an
        exception or a cancellation."""
        given = False

        async def app_receive() -> Message:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        ext = scope.get("extensions")
        if ext and any(k in ext for k in _UNBUFFERABLE):
            scope = dict(scope)
            scope["extensions"] = {k: v for k, v in ext.items() if k not in _UNBUFFERABLE}

        async def extend() -> None:
            while True:
                await asyncio.sleep(max(self.lease / 3.0, 0.01))
                try:
                    await client.extend_effect_lease(token, self.lease)
                except Exception:  # the next tick tries again; a lost lease shows when storing
                    pass

        extender = asyncio.get_running_loop().create_task(extend())
        rec = _Recorder(send, self.max_body_bytes)
        try:
            await self.app(scope, app_receive, rec)
        except BaseException:
            await _stop(extender)
            await _release(client, token)
            raise
        await _stop(extender)
        if rec.start is None or not rec.complete:
            # The app returned without a whole answer: the server answers
            # 500 (or closes the connection), so the key is released.
            _log.warning("idempotency: the app returned without completing its response; key released")
            await _release(client, token)
            return
        if rec.over:
            await _release(client, token)  # sent already, not stored
            return
        if rec.status >= 500:
            await _release(client, token)
        else:
            headers = rec.headers()
            stored: Dict[str, List[str]] = {}
            for h in self.replay_headers:
                want = h.lower()
                values = [v.decode("utf-8", "replace") for k, v in headers if k.decode("latin-1").lower() == want]
                if values:
                    stored[canonical_header_key(h)] = values
            record: Dict[str, Any] = {"fingerprint": fp, "status": rec.status}
            if stored:
                record["header"] = dict(sorted(stored.items()))
            if rec.body:
                record["body"] = base64.b64encode(bytes(rec.body)).decode("ascii")
            try:
                await asyncio.shield(client.complete_effect(token, _go_json(record).encode("utf-8")))
            except Exception as err:
                # The answer was not stored: a retry runs the handler again
                # once the lease ends. Say so rather than pretend.
                await _release(client, token)
                await _unavailable(send, err)
                return
        await rec.flush()


async def _stop(task: "asyncio.Task[None]") -> None:
    """Cancels the lease extender and waits for it to end."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _release(client: SeppClient, token: str) -> None:
    """Releases the claim so a retry can run the handler; shielded from the
    request's cancellation. A failure is logged: the key then frees itself
    when the claim's lease ends."""
    try:
        await asyncio.shield(client.release_effect(token))
    except LeaseLostError:
        pass
    except Exception as err:
        _log.warning("idempotency: releasing the key failed (a retry waits for the lease to end): %s", err)


async def _replay(send: Send, result: bytes, fp: str) -> None:
    """Answers with the stored response, or 422 when it was stored for
    another request."""
    try:
        doc = json.loads(result)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        stored_fp = doc.get("fingerprint", "")
        status = doc.get("status", 0)
        header = doc.get("header") or {}
        raw_body = doc.get("body") or ""
        if not isinstance(stored_fp, str) or not isinstance(raw_body, str) or not isinstance(header, dict):
            raise ValueError("a member has the wrong type")
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 999:
            raise ValueError(f"invalid status {status!r}")
        if not all(isinstance(k, str) and isinstance(vs, list) and all(isinstance(v, str) for v in vs)
                   for k, vs in header.items()):
            raise ValueError("header is not a map of string lists")
        body = base64.b64decode(raw_body, validate=True)
    except (ValueError, TypeError, binascii.Error) as err:
        await _problem(send, 500, "IDEMPOTENCY_RECORD_UNREADABLE",
                       f"the response stored under this key cannot be read: {err}")
        return
    if stored_fp != fp:
        await _problem(send, 422, "IDEMPOTENCY_KEY_REUSED",
                       "this key was used with another request (method, route or body); use a new key for a new request")
        return
    headers: List[Tuple[bytes, bytes]] = []
    for k, vs in header.items():
        name = k.lower()
        if name in ("idempotent-replayed", "content-length", "transfer-encoding"):
            continue
        headers += [(name.encode("utf-8"), v.encode("utf-8")) for v in vs]
    headers.append((REPLAYED_HEADER.lower().encode("ascii"), b"true"))
    if _has_body(status):
        headers.append((b"content-length", b"%d" % len(body)))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
