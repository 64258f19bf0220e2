"""The Sepp client: enqueue with idempotency keys, read and manage jobs.

::

    client = await SeppClient.connect("http://localhost:50051")
    ack = await client.enqueue(EnqueueRequest("emails", "receipt", idempotency_key="receipt-order-8a3f"))
    # ack.deduplicated is True when the key was already recorded: ack.job_id
    # then names the original job.

A client is safe for concurrent use by many tasks of one event loop.
Concurrent ``enqueue`` calls are coalesced into ``EnqueueBatch`` RPCs
(natural batching: while the RPCs in flight, two at most by default, are
busy, the next calls gather and go together when one returns; an idle client
sends at once), and each caller still gets its own ack or error. Keyed
enqueues whose fate is unknown after a transport error are resent with the
same key, which makes the retry harmless (:mod:`sepp.retry`).

The client speaks the Connect protocol over HTTP/1.1 (httpx), with one
connection pool shared by every call, and the binary protobuf codec
(``application/proto``): the messages are the ones protoc generates from
``proto/sepp/v1`` (:mod:`sepp.v1`), so no field name or number is written
here by hand. Binary rather than Connect JSON because protobuf's JSON
mapping (``json_format``) is pure Python: measured on a batch of 1,000 jobs,
it costs about 10 us per job to encode and 17 to parse, the binary codec
(C++) about 2 and 4, and a Python client's CPU is what bounds its
throughput. A Connect error's body is JSON whatever the codec; its reason
is read from the binary ErrorInfo it carries.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from datetime import datetime
from typing import (
    Any,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
)
from urllib.parse import urlsplit

import httpx
from google.protobuf.message import DecodeError, Message

from . import _wire
from ._batcher import Batcher
from ._wire import Seconds
from .errors import (
    IdempotencyKeyEmptyError,
    IdempotencyKeyTooLongError,
    InternalError,
    InvalidFieldError,
    NotDeadError,
    SeppError,
    UnavailableError,
    error_for,
)
from .types import (
    Ack,
    BatchResult,
    Completion,
    EffectClaim,
    EffectRecord,
    EffectState,
    EnqueueRequest,
    FailResult,
    Job,
    JobPage,
    JobState,
    KeyLookup,
    KeyRelease,
    QueueInfo,
    Reservation,
    payload_bytes,
)
from .retry import RetryPolicy, jittered_delay
from .v1 import admin_pb2, effect_pb2, job_pb2, worker_pb2

__all__ = ["SeppClient", "RetryPolicy", "DEFAULT_ADDRESS"]

#: The server's default address.
DEFAULT_ADDRESS = "http://127.0.0.1:50051"

#: Connect's content types of the binary protobuf codec and of JSON.
_PROTO = "application/proto"
_JSON = "application/json"

_M = TypeVar("_M", bound=Message)
_T = TypeVar("_T")


def _base_url(address: str) -> str:
    """Turns "http://host:port", "https://host:port" or a bare "host:port"
    into a base URL."""
    if "://" not in address:
        address = "http://" + address
    parts = urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"address {address!r}: want http://host:port or https://host:port")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def _utf8_len(field: str, value: str) -> int:
    """The length of value in bytes of UTF-8, or InvalidFieldError when it
    cannot be encoded (a lone surrogate)."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidFieldError(
            f"{field}: is not valid UTF-8 (it contains a lone surrogate); keys are UTF-8 strings",
            metadata={"field": field},
        ) from None


def check_idempotency_key(key: str, limit: Optional[int]) -> None:
    """Checks a key as the server does: 1 to ``limit`` bytes of UTF-8,
    counted in bytes, not characters. No character is reserved.

    Raises:
        IdempotencyKeyEmptyError: the key is "".
        IdempotencyKeyTooLongError: longer than ``limit`` bytes.
        InvalidFieldError: not encodable as UTF-8.
    """
    if key == "":
        raise IdempotencyKeyEmptyError(
            "idempotency key is empty: pass idempotency_key=None to enqueue without dedup, "
            "or derive a key from what the job is about",
            metadata={"field": "idempotency_key"},
        )
    n = _utf8_len("idempotency_key", key)
    if limit is not None and limit > 0 and n > limit:
        raise IdempotencyKeyTooLongError(
            f"idempotency key is {n} bytes; the limit is {limit} (max_idempotency_key_bytes): "
            "use a shorter, stable id such as the entity or event id"
        )


class _Connecting:
    """What :meth:`SeppClient.connect` returns: await it for the client, or
    use it with ``async with`` to close the client at the end of the block."""

    def __init__(self, coro: Awaitable["SeppClient"]) -> None:
        self._coro = coro
        self._client: Optional[SeppClient] = None

    def __await__(self) -> Generator[Any, None, "SeppClient"]:
        return self._coro.__await__()

    async def __aenter__(self) -> "SeppClient":
        self._client = await self._coro
        return self._client

    async def __aexit__(self, *exc: Any) -> None:
        if self._client is not None:
            await self._client.close()


class SeppClient:
    """A client of one Sepp server (or a load balancer in front of several).

    Create it with :meth:`connect`. Close it with :meth:`close`, or use it as
    an async context manager::

        async with SeppClient.connect("http://localhost:50051") as client:
            ...
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        address: str,
        batching: bool,
        retry: RetryPolicy,
        timeout: float,
        max_in_flight: int,
        max_batch_size: int,
        max_batch_bytes: int,
        max_idempotency_key_bytes: Optional[int],
    ) -> None:
        """Use :meth:`connect` instead; this wires an existing httpx client."""
        self._http = http
        self.address = address
        self._retry = retry
        self._timeout = timeout
        self._key_limit = max_idempotency_key_bytes
        self._batcher: Optional[Batcher] = (
            Batcher(self._send_enqueues, retry.max_retries, max_in_flight, max_batch_size, max_batch_bytes)
            if batching
            else None
        )
        self._closed = False

    # --- connecting ----------------------------------------------------------

    @classmethod
    def connect(
        cls,
        address: str = DEFAULT_ADDRESS,
        *,
        token: Optional[str] = None,
        verify: Union[bool, str, ssl.SSLContext] = True,
        cert: Optional[Union[str, Tuple[str, str]]] = None,
        batching: bool = True,
        retry: Optional[RetryPolicy] = None,
        timeout: Seconds = 30.0,
        max_connections: int = 64,
        max_in_flight: int = 2,
        max_batch_size: int = 1000,
        max_batch_bytes: int = 4 << 20,
        max_idempotency_key_bytes: Optional[int] = 256,
        headers: Optional[Mapping[str, str]] = None,
        check: bool = True,
        trust_env: bool = False,
    ) -> _Connecting:
        """Connects to the server at ``address`` and checks that it answers.

        ``await SeppClient.connect(url)`` returns the client;
        ``async with SeppClient.connect(url) as client:`` closes it at the end.

        Args:
            address: ``"http://host:port"``, ``"https://host:port"`` or a bare
                ``"host:port"`` (plain HTTP).
            token: a bearer token, sent as ``Authorization: Bearer <token>``
                on every call (for a server with ``[auth]``).
            verify: TLS server verification for https: True (the system's
                CAs), a CA bundle path, an :class:`ssl.SSLContext`, or False
                (do not verify; for tests only).
            cert: a client certificate for mutual TLS: a PEM file holding the
                certificate and key, or a ``(cert_file, key_file)`` pair.
            batching: coalesce concurrent enqueues into EnqueueBatch RPCs.
                Default True.
            retry: how many times a call whose outcome is unknown is
                resent: a keyed enqueue, complete, fail, complete_effect
                (:mod:`sepp.retry` says which calls and how long each
                resend waits). Default :class:`RetryPolicy()` (5 resends).
            timeout: the bound of each RPC, in seconds. Default 30. A
                reserve's long poll gets its wait on top.
            max_connections: the HTTP connection pool's size: size it to the
                number of calls you run at once (enqueues are batched, so
                they need few). Default 64.
            max_in_flight: the coalesced EnqueueBatch RPCs in flight at once.
                Default 2.
            max_batch_size: the most jobs in one coalesced RPC; keep it at or
                below the server's ``max_batch_size``. Default 1000.
            max_batch_bytes: the most payload bytes in one coalesced RPC.
                Default 4 MiB.
            max_idempotency_key_bytes: the key length the client checks before
                sending (the server checks again and decides). Set it to the
                server's ``max_idempotency_key_bytes`` if you change that;
                None turns the local length check off. Default 256.
            headers: extra HTTP headers sent with every call.
            check: call the server's health check before returning (fails
                with :class:`~sepp.UnavailableError` when it cannot be
                reached). Default True.
            trust_env: let httpx read proxy and TLS settings from the
                environment. Default False.

        Raises:
            UnavailableError: the server cannot be reached (with ``check``).
            ValueError: the address is not a URL of the kind above.
        """
        return _Connecting(
            cls._connect(
                address,
                token=token,
                verify=verify,
                cert=cert,
                batching=batching,
                retry=retry or RetryPolicy(),
                timeout=_wire.seconds(timeout) or 30.0,
                max_connections=max_connections,
                max_in_flight=max_in_flight,
                max_batch_size=max_batch_size,
                max_batch_bytes=max_batch_bytes,
                max_idempotency_key_bytes=max_idempotency_key_bytes,
                headers=headers,
                check=check,
                trust_env=trust_env,
            )
        )

    @classmethod
    async def _connect(
        cls,
        address: str,
        *,
        token: Optional[str],
        verify: Union[bool, str, ssl.SSLContext],
        cert: Optional[Union[str, Tuple[str, str]]],
        batching: bool,
        retry: RetryPolicy,
        timeout: float,
        max_connections: int,
        max_in_flight: int,
        max_batch_size: int,
        max_batch_bytes: int,
        max_idempotency_key_bytes: Optional[int],
        headers: Optional[Mapping[str, str]],
        check: bool,
        trust_env: bool,
    ) -> "SeppClient":
        """Builds the client and checks the server (see connect)."""
        # The package's version, read here: the package imports this module.
        from . import __version__

        base = _base_url(address)
        hdrs = {
            "Connect-Protocol-Version": "1",
            "User-Agent": f"sepp-python/{__version__}",
        }
        if token:
            hdrs["Authorization"] = f"Bearer {token}"
        if headers:
            hdrs.update(headers)
        http = httpx.AsyncClient(
            base_url=base,
            headers=hdrs,
            verify=verify,
            cert=cert,
            http1=True,
            http2=False,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=30.0,
            ),
            trust_env=trust_env,
        )
        client = cls(
            http,
            address=base,
            batching=batching,
            retry=retry,
            timeout=timeout,
            max_in_flight=max_in_flight,
            max_batch_size=max_batch_size,
            max_batch_bytes=max_batch_bytes,
            max_idempotency_key_bytes=max_idempotency_key_bytes,
        )
        if check:
            try:
                await client.health()
            except SeppError as err:
                await client.close()
                if isinstance(err, UnavailableError):
                    raise UnavailableError(f"cannot reach the server at {base}: {err.message}") from err
                raise
            except BaseException:
                await client.close()
                raise
        return client

    async def health(self) -> str:
        """Calls the server's health check and returns its status
        (``"SERVING"``)."""
        # grpc.health.v1 is not one of Sepp's protos, so this one call uses
        # Connect's JSON codec, which needs no generated message.
        resp = await self._post("grpc.health.v1.Health/Check", b"{}", _JSON, self._timeout)
        try:
            data = resp.json()
        except ValueError as exc:
            raise InternalError("the health check answered 200 with a body that is not JSON") from exc
        return str(data.get("status", "UNKNOWN")) if isinstance(data, dict) else "UNKNOWN"

    async def close(self) -> None:
        """Closes the client: pending enqueues fail, the connections close."""
        if self._closed:
            return
        self._closed = True
        if self._batcher is not None:
            await self._batcher.close()
        await self._http.aclose()

    async def __aenter__(self) -> "SeppClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


    # --- transport -----------------------------------------------------------

    async def _post(self, method: str, content: bytes, content_type: str, timeout: float) -> httpx.Response:
        """Sends one unary Connect call and returns its 200 answer.

        Raises the SeppError of an error answer, or UnavailableError for a
        transport failure (with ``unsent`` set when the request certainly
        never left: the connection could not be opened).
        """
        if self._closed:
            raise UnavailableError("the client is closed")
        try:
            resp = await self._http.post(
                "/" + method,
                content=content,
                headers={"Content-Type": content_type, "Connect-Timeout-Ms": str(max(1, int(timeout * 1000)))},
                timeout=httpx.Timeout(timeout + 2.0, connect=min(timeout, 10.0)),
            )
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            err = UnavailableError(f"cannot connect to {self.address}: {exc or type(exc).__name__}")
            err.unsent = True
            raise err from exc
        except ssl.SSLError as exc:
            # httpx 0.23 lets a failed TLS handshake (an unknown CA, a
            # refused client certificate) escape unwrapped; nothing was sent.
            err = UnavailableError(f"TLS handshake with {self.address} failed: {exc}")
            err.unsent = True
            raise err from exc
        except httpx.PoolTimeout as exc:
            err = UnavailableError(
                f"no free connection to {self.address} in time (max_connections is too low for this load)"
            )
            err.unsent = True
            raise err from exc
        except httpx.TransportError as exc:
            raise UnavailableError(
                f"{method}: {type(exc).__name__}: {exc}; the outcome is unknown"
            ) from exc
        if resp.status_code != 200:
            raise self._error_from_response(method, resp)
        return resp

    async def _rpc(
        self, method: str, request: Message, answer: Type[_M], *, timeout: Optional[float] = None
    ) -> _M:
        """Sends one unary call with the binary codec and returns its answer,
        decoded as ``answer``; raises as :meth:`_post` does."""
        resp = await self._post(
            method, request.SerializeToString(), _PROTO, timeout if timeout is not None else self._timeout
        )
        try:
            return answer.FromString(resp.content)
        except DecodeError as exc:
            raise InternalError(
                f"{method}: the server answered 200 with a body that is not a {answer.DESCRIPTOR.full_name}"
            ) from exc

    async def _resent(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """Makes a call whose repeat is harmless, and makes it again, after
        the shared policy's wait (:func:`sepp.retry.delay`), while its
        outcome is unknown (UnavailableError) and resends are left."""
        attempt = 0
        while True:
            try:
                return await call()
            except UnavailableError:
                if attempt >= self._retry.max_retries or self._closed:
                    raise
                await asyncio.sleep(jittered_delay(attempt))
                attempt += 1

    @staticmethod
    def _error_from_response(method: str, resp: httpx.Response) -> SeppError:
        """Turns a Connect error answer into its SeppError."""
        data: Any = None
        try:
            data = json.loads(resp.content)
        except ValueError:
            pass
        if isinstance(data, dict) and "code" in data:
            code = str(data.get("code", "unknown"))
            message = str(data.get("message", ""))
            info = _wire.error_info_from_details(data.get("details"))
            reason, metadata = (info[0], info[2]) if info else (None, {})
            return error_for(code, reason, message, metadata)
        # No Connect error body (a proxy, or an HTTP-level refusal): the
        # Connect protocol's mapping of HTTP statuses to codes.
        code = {
            400: "internal",
            401: "unauthenticated",
            403: "permission_denied",
            404: "unimplemented",
            408: "deadline_exceeded",
            415: "internal",
            429: "unavailable",
            502: "unavailable",
            503: "unavailable",
            504: "unavailable",
        }.get(resp.status_code, "unknown")
        text = resp.text[:200] if resp.content else ""
        return error_for(code, None, f"{method}: HTTP {resp.status_code} {text}".rstrip())

    # --- enqueue -------------------------------------------------------------

    def _prepare(self, request: EnqueueRequest) -> job_pb2.EnqueueRequest:
        """Checks a request locally (fast fail; the server decides) and
        returns its message."""
        if not isinstance(request, EnqueueRequest):
            raise TypeError(f"want an EnqueueRequest, not {type(request).__name__}")
        _utf8_len("queue", request.queue)
        _utf8_len("job_type", request.job_type)
        if request.idempotency_key is not None:
            check_idempotency_key(request.idempotency_key, self._key_limit)
        return request.to_proto()

    async def enqueue(self, request: EnqueueRequest) -> Ack:
        """Enqueues one job and returns its ack.

        With a key already recorded on the queue within its dedup window, no
        job is created: ``ack.deduplicated`` is True and ``ack.job_id`` names
        the original job. ``ack.idempotency_key`` is the key the server
        judged the enqueue by: the request's, or on a queue with
        ``key_fields`` the one it derived from the payload.

        Raises:
            IdempotencyKeyTooLongError: the key is over the limit (checked
                locally: nothing is sent).
            IdempotencyKeyEmptyError: the key is "" (checked locally).
            SeppError: the subclass of the server's reason, e.g.
                UnknownQueueError, IdempotencyKeyConflictError.
            UnavailableError: the server could not be reached after the
                retries (keyed) or at once (unkeyed): the outcome is unknown.
        """
        message = self._prepare(request)
        keyed = request.idempotency_key is not None
        if self._batcher is not None:
            return await self._batcher.enqueue(message, keyed)
        if keyed:
            return await self._resent(lambda: self._enqueue_one(message))
        return await self._enqueue_one(message)

    async def _enqueue_one(self, message: job_pb2.EnqueueRequest) -> Ack:
        """Sends one Enqueue RPC."""
        return Ack.from_proto(await self._rpc("sepp.v1.JobService/Enqueue", message, job_pb2.EnqueueResponse))

    async def _send_enqueues(self, jobs: Sequence[job_pb2.EnqueueRequest]) -> List[Union[Ack, SeppError]]:
        """The batcher's send function: one job as an Enqueue RPC, more as an
        EnqueueBatch, answered with an ack or an error per job."""
        if len(jobs) == 1:
            return [await self._enqueue_one(jobs[0])]
        return await self._enqueue_batch(jobs, atomic=False)

    async def _enqueue_batch(
        self, jobs: Sequence[job_pb2.EnqueueRequest], *, atomic: bool
    ) -> List[Union[Ack, SeppError]]:
        """Sends one EnqueueBatch RPC; returns an ack or an error per job."""
        answer = await self._rpc(
            "sepp.v1.JobService/EnqueueBatch",
            job_pb2.EnqueueBatchRequest(jobs=jobs, atomic=atomic),
            job_pb2.EnqueueBatchResponse,
        )
        if len(answer.results) != len(jobs):
            raise InternalError(f"server answered a batch of {len(jobs)} jobs with {len(answer.results)} results")
        return [
            _wire.item_error(r.error) if r.HasField("error") else Ack.from_proto(r.ack) for r in answer.results
        ]

    async def enqueue_batch(
        self, requests: Sequence[EnqueueRequest], *, atomic: bool = False
    ) -> List[BatchResult]:
        """Enqueues jobs in one RPC and returns one result per job, in order.

        A non-atomic batch judges each job alone: each result has an ``ack``
        (with its own ``deduplicated`` flag) or an ``error``. An atomic batch
        validates every job first and writes all or none: if one is invalid
        the call raises that job's error, whose ``index`` names it, and
        nothing is written. A dedup hit is not a failure.

        A batch whose fate is unknown after a transport error is resent only
        when every job has a key, since then a resend cannot duplicate one.

        Raises:
            SeppError: an atomic batch with a bad job (``err.index``), a
                batch over the server's ``max_batch_size``
                (BatchTooLargeError), or a transport failure.
        """
        results: List[Optional[BatchResult]] = [None] * len(requests)
        send: List[job_pb2.EnqueueRequest] = []
        index: List[int] = []
        for i, req in enumerate(requests):
            try:
                message = self._prepare(req)
            except SeppError as err:
                if atomic:
                    err.metadata["index"] = str(i)
                    err.message = f"jobs[{i}]: {err.message}"
                    err.args = (f"{err.reason}: {err.message}",)
                    raise
                results[i] = BatchResult(error=err)
                continue
            send.append(message)
            index.append(i)
        if send:
            if all(requests[i].idempotency_key is not None for i in index):
                got = await self._resent(lambda: self._enqueue_batch(send, atomic=atomic))
            else:
                got = await self._enqueue_batch(send, atomic=atomic)
            for k, r in zip(index, got):
                results[k] = BatchResult(error=r) if isinstance(r, SeppError) else BatchResult(ack=r)
        return [r for r in results if r is not None]

    # --- jobs and keys -------------------------------------------------------

    async def get_job(self, job_id: str) -> Job:
        """Reads a job.

        Raises:
            JobNotFoundError: no job has this id (never existed, or deleted
                by retention).
        """
        answer = await self._rpc(
            "sepp.v1.JobService/GetJob", job_pb2.GetJobRequest(job_id=job_id), job_pb2.GetJobResponse
        )
        return Job.from_proto(answer.job)

    async def cancel_job(self, job_id: str) -> Job:
        """Cancels a job that has not finished and returns it; a finished job
        is returned unchanged.

        Raises:
            JobNotFoundError: no job has this id.
        """
        answer = await self._rpc(
            "sepp.v1.JobService/CancelJob", job_pb2.CancelJobRequest(job_id=job_id), job_pb2.CancelJobResponse
        )
        return Job.from_proto(answer.job)

    def _lookup_limit(self) -> Optional[int]:
        """The key length a lookup or release accepts."""
        # A lookup or release accepts at least the 64 hex digits of a
        # content-derived key (dedup_by_content), as on the server.
        return None if self._key_limit is None else max(self._key_limit, 64)

    async def lookup_idempotency_key(self, queue: str, key: str) -> KeyLookup:
        """Answers "was this already enqueued, and what became of it?"
        without enqueueing anything.

        Returns a :class:`KeyLookup` whose ``found`` is False when no live
        record exists (never enqueued, expired, or released).
        """
        check_idempotency_key(key, self._lookup_limit())
        return await self._lookup(job_pb2.LookupIdempotencyKeyRequest(queue=queue, idempotency_key=key))

    async def lookup_idempotency_key_by_payload(self, queue: str, payload: Union[bytes, str]) -> KeyLookup:
        """:meth:`lookup_idempotency_key` for the key a queue with
        ``key_fields`` derives from ``payload`` (bytes, or a str encoded as
        UTF-8): the server derives it as an enqueue of that payload would,
        and the answer's ``idempotency_key`` says which key it was.

        Raises:
            InvalidFieldError: the queue has no ``key_fields``, or the
                payload gives no key (``metadata["pointer"]`` names the
                field at fault).
        """
        return await self._lookup(job_pb2.LookupIdempotencyKeyRequest(queue=queue, payload=payload_bytes(payload)))

    async def _lookup(self, request: job_pb2.LookupIdempotencyKeyRequest) -> KeyLookup:
        """Sends a LookupIdempotencyKey RPC."""
        answer = await self._rpc(
            "sepp.v1.JobService/LookupIdempotencyKey", request, job_pb2.LookupIdempotencyKeyResponse
        )
        return KeyLookup.from_proto(answer)

    async def release_idempotency_key(self, queue: str, key: str) -> KeyRelease:
        """Deletes the key's dedup record now, so the next enqueue with it
        creates a new job. It never touches the job."""
        check_idempotency_key(key, self._lookup_limit())
        return await self._release(job_pb2.ReleaseIdempotencyKeyRequest(queue=queue, idempotency_key=key))

    async def release_idempotency_key_by_payload(self, queue: str, payload: Union[bytes, str]) -> KeyRelease:
        """:meth:`release_idempotency_key` for the key a queue with
        ``key_fields`` derives from ``payload``, derived by the server; the
        answer's ``idempotency_key`` says which key it released.

        Raises:
            InvalidFieldError: the queue has no ``key_fields``, or the
                payload gives no key.
        """
        return await self._release(job_pb2.ReleaseIdempotencyKeyRequest(queue=queue, payload=payload_bytes(payload)))

    async def _release(self, request: job_pb2.ReleaseIdempotencyKeyRequest) -> KeyRelease:
        """Sends a ReleaseIdempotencyKey RPC."""
        answer = await self._rpc(
            "sepp.v1.JobService/ReleaseIdempotencyKey", request, job_pb2.ReleaseIdempotencyKeyResponse
        )
        return KeyRelease.from_proto(answer)

    # --- workers -------------------------------------------------------------

    async def reserve(
        self,
        queues: Union[str, Sequence[str]],
        *,
        worker_id: str = "",
        max_jobs: int = 1,
        lease: Optional[Seconds] = None,
        wait: Optional[Seconds] = None,
    ) -> List[Reservation]:
        """Leases up to ``max_jobs`` jobs from ``queues``, waiting up to
        ``wait`` seconds for one (long poll). Returns none when the wait ends
        with nothing ready. Most programs use :class:`sepp.Worker`, which
        reserves, extends leases and reports outcomes for them.

        Args:
            lease: how long each job is leased; None: the queue's lease_ms.
        """
        wait_s = _wire.seconds(wait) or 0.0
        request = worker_pb2.ReserveRequest(
            queues=[queues] if isinstance(queues, str) else list(queues),
            worker_id=worker_id,
            max_jobs=max_jobs,
            lease_ms=_wire.milliseconds(lease),
            wait_ms=_wire.milliseconds(wait_s),
        )
        answer = await self._rpc(
            "sepp.v1.WorkerService/Reserve", request, worker_pb2.ReserveResponse, timeout=self._timeout + wait_s
        )
        return [Reservation.from_proto(r) for r in answer.jobs]

    async def complete(self, job_id: str, lease_token: str, result: Union[bytes, str, None] = None) -> None:
        """Finishes a job, with an optional result that get_job and
        lookup_idempotency_key return.

        Resent after transport errors: a repeat with the same token of a
        Complete that was committed succeeds and changes nothing.

        Raises:
            LeaseLostError: the token no longer holds the lease.
        """
        request = worker_pb2.CompleteRequest(
            job_id=job_id, lease_token=lease_token, result=payload_bytes(result) if result else b""
        )
        await self._resent(
            lambda: self._rpc("sepp.v1.WorkerService/Complete", request, worker_pb2.CompleteResponse)
        )

    async def complete_batch(self, completions: Sequence[Completion]) -> List[Optional[SeppError]]:
        """Completes many jobs in one RPC, each judged alone, and returns one
        entry per job: None, or its error (such as LeaseLostError)."""
        request = worker_pb2.CompleteBatchRequest(
            completions=[
                worker_pb2.CompleteRequest(job_id=c.job_id, lease_token=c.lease_token, result=c.result)
                for c in completions
            ]
        )
        answer = await self._resent(
            lambda: self._rpc("sepp.v1.WorkerService/CompleteBatch", request, worker_pb2.CompleteBatchResponse)
        )
        if len(answer.results) != len(completions):
            raise InternalError("server answered a batch with the wrong number of results")
        return [_wire.item_error(r.error) if r.HasField("error") else None for r in answer.results]

    async def fail(
        self,
        job_id: str,
        lease_token: str,
        error: str,
        *,
        retry_after: Optional[Seconds] = None,
        permanent: bool = False,
    ) -> FailResult:
        """Reports a failed attempt. With attempts left the job is retried
        after the queue's backoff, or after ``retry_after`` seconds when
        given; ``permanent`` dead-letters it at once. Resent after transport
        errors: a repeat of a committed Fail succeeds with ``already_failed``.

        Raises:
            LeaseLostError: the token no longer holds the lease.
        """
        request = worker_pb2.FailRequest(job_id=job_id, lease_token=lease_token, error=error, permanent=permanent)
        if retry_after is not None:
            request.retry_after_ms = _wire.milliseconds(retry_after)
        answer = await self._resent(lambda: self._rpc("sepp.v1.WorkerService/Fail", request, worker_pb2.FailResponse))
        return FailResult(
            state=JobState.parse(answer.state),
            next_run_at=_wire.datetime_of(answer, "next_run_at"),
            already_failed=answer.already_failed,
        )

    async def extend_lease(self, job_id: str, lease_token: str, lease: Seconds) -> Optional[datetime]:
        """Keeps a lease alive for another ``lease`` seconds from now and
        returns its new end.

        Raises:
            LeaseLostError: the token no longer holds the lease.
        """
        answer = await self._rpc(
            "sepp.v1.WorkerService/ExtendLease",
            worker_pb2.ExtendLeaseRequest(job_id=job_id, lease_token=lease_token, lease_ms=_wire.milliseconds(lease)),
            worker_pb2.ExtendLeaseResponse,
        )
        return _wire.datetime_of(answer, "lease_expires_at")

    # --- effects -------------------------------------------------------------

    async def claim_effect(
        self,
        scope: str,
        key: str,
        *,
        ttl: Optional[Seconds] = None,
        lease: Optional[Seconds] = None,
        wait: Optional[Seconds] = None,
    ) -> EffectClaim:
        """Claims an effect key. Most programs use :func:`sepp.effect.do`,
        which claims, extends, completes and releases for them.

        Args:
            ttl: how long the completed record lives; None: 24 h.
            lease: how long the claim holds without an extension; None: 30 s.
            wait: how long the server waits for another holder to finish.
        """
        wait_s = _wire.seconds(wait) or 0.0
        request = effect_pb2.ClaimEffectRequest(
            scope=scope,
            key=key,
            ttl_ms=_wire.milliseconds(ttl),
            lease_ms=_wire.milliseconds(lease),
            wait_ms=_wire.milliseconds(wait_s),
        )
        answer = await self._rpc(
            "sepp.v1.EffectService/ClaimEffect", request, effect_pb2.ClaimEffectResponse, timeout=self._timeout + wait_s
        )
        return EffectClaim(
            state=EffectState.parse(answer.outcome),
            token=answer.token,
            result=answer.result,
            lease_expires_at=_wire.datetime_of(answer, "lease_expires_at"),
        )

    async def complete_effect(self, token: str, result: bytes = b"") -> bytes:
        """Stores the effect's result under the claim's token and returns
        the stored result. Resent after transport errors: a repeat with the
        token that completed the effect succeeds and returns what the first
        call stored.

        Raises:
            LeaseLostError: the token no longer holds the key.
        """
        request = effect_pb2.CompleteEffectRequest(token=token, result=result)
        answer = await self._resent(
            lambda: self._rpc("sepp.v1.EffectService/CompleteEffect", request, effect_pb2.CompleteEffectResponse)
        )
        return answer.result

    async def release_effect(self, token: str) -> None:
        """Gives the claim up after a failed effect, so a retry can run it."""
        await self._rpc(
            "sepp.v1.EffectService/ReleaseEffect",
            effect_pb2.ReleaseEffectRequest(token=token),
            effect_pb2.ReleaseEffectResponse,
        )

    async def extend_effect_lease(self, token: str, lease: Seconds) -> Optional[datetime]:
        """Keeps a claim alive for another ``lease`` seconds from now."""
        answer = await self._rpc(
            "sepp.v1.EffectService/ExtendEffectLease",
            effect_pb2.ExtendEffectLeaseRequest(token=token, lease_ms=_wire.milliseconds(lease)),
            effect_pb2.ExtendEffectLeaseResponse,
        )
        return _wire.datetime_of(answer, "lease_expires_at")

    async def get_effect(self, scope: str, key: str) -> EffectRecord:
        """Reads an effect key without claiming it."""
        answer = await self._rpc(
            "sepp.v1.EffectService/GetEffect",
            effect_pb2.GetEffectRequest(scope=scope, key=key),
            effect_pb2.GetEffectResponse,
        )
        if not answer.found:
            return EffectRecord(found=False)
        return EffectRecord(
            found=True,
            state=EffectState.parse(answer.state),
            result=answer.result,
            completed_at=_wire.datetime_of(answer, "completed_at"),
            expires_at=_wire.datetime_of(answer, "expires_at"),
        )

    # --- admin ---------------------------------------------------------------

    async def list_queues(self) -> List[QueueInfo]:
        """Lists the declared queues and every queue that has jobs."""
        answer = await self._rpc(
            "sepp.v1.AdminService/ListQueues", admin_pb2.ListQueuesRequest(), admin_pb2.ListQueuesResponse
        )
        return [QueueInfo.from_proto(q) for q in answer.queues]

    async def queue_info(self, queue: str) -> QueueInfo:
        """The counts of one queue (all zero when it has no jobs)."""
        for q in await self.list_queues():
            if q.name == queue:
                return q
        return QueueInfo(name=queue)

    async def list_jobs(
        self,
        *,
        queue: str = "",
        state: Optional[JobState] = None,
        page_size: int = 0,
        page_token: str = "",
    ) -> JobPage:
        """Lists jobs by queue and state, a page at a time, oldest first."""
        request = admin_pb2.ListJobsRequest(
            queue=queue,
            state=(state or JobState.UNSPECIFIED).to_proto(),
            page_size=page_size,
            page_token=page_token,
        )
        answer = await self._rpc("sepp.v1.AdminService/ListJobs", request, admin_pb2.ListJobsResponse)
        return JobPage(jobs=[Job.from_proto(j) for j in answer.jobs], next_page_token=answer.next_page_token)

    @staticmethod
    def _count_dead(count: int, missing: Sequence[str]) -> int:
        """count, or NotDeadError carrying it when the answer lists ids that
        named no dead job."""
        if missing:
            raise NotDeadError(list(missing), count)
        return count

    async def requeue_dead_jobs(
        self, *, queue: str = "", job_ids: Optional[Iterable[str]] = None, all: bool = False
    ) -> int:
        """Makes the selected dead jobs available again with their attempts
        reset; returns how many.

        Raises :class:`NotDeadError` when some of ``job_ids`` named no dead
        job: the others were requeued all the same, and the error's
        ``count`` says how many.
        """
        answer = await self._rpc(
            "sepp.v1.AdminService/RequeueDeadJobs",
            admin_pb2.RequeueDeadJobsRequest(queue=queue, job_ids=list(job_ids or ()), all=all),
            admin_pb2.RequeueDeadJobsResponse,
        )
        return self._count_dead(answer.requeued, answer.missing_job_ids)

    async def purge_dead_jobs(
        self, *, queue: str = "", job_ids: Optional[Iterable[str]] = None, all: bool = False
    ) -> int:
        """Deletes the selected dead jobs; returns how many. Their dedup
        records stay until their windows end.

        Raises :class:`NotDeadError` when some of ``job_ids`` named no dead
        job: the others were purged all the same, and the error's ``count``
        says how many.
        """
        answer = await self._rpc(
            "sepp.v1.AdminService/PurgeDeadJobs",
            admin_pb2.PurgeDeadJobsRequest(queue=queue, job_ids=list(job_ids or ()), all=all),
            admin_pb2.PurgeDeadJobsResponse,
        )
        return self._count_dead(answer.purged, answer.missing_job_ids)

    async def pause_queue(self, queue: str, *, create: bool = False) -> None:
        """Stops delivery from a queue. Enqueues still succeed.

        A queue the server does not know (neither declared in ``[[queues]]``
        nor holding jobs: none :meth:`list_queues` lists) is refused with
        :class:`UnknownQueueError`, as most likely a mistyped name, unless
        ``create`` is true. Set it to pause a queue before its first job.
        """
        await self._rpc(
            "sepp.v1.AdminService/PauseQueue",
            admin_pb2.PauseQueueRequest(queue=queue, create=create),
            admin_pb2.PauseQueueResponse,
        )

    async def resume_queue(self, queue: str, *, create: bool = False) -> None:
        """Resumes delivery from a paused queue. A queue the server does not
        know is refused with :class:`UnknownQueueError` unless ``create``."""
        await self._rpc(
            "sepp.v1.AdminService/ResumeQueue",
            admin_pb2.ResumeQueueRequest(queue=queue, create=create),
            admin_pb2.ResumeQueueResponse,
        )
