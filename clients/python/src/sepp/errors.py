"""Errors: one exception class per reason the server gives, under SeppError.

Every error the client raises for a server answer, a transport failure or
its own checks before sending is a :class:`SeppError`. Catch the class of
the reason you care about::

    try:
        ack = await client.enqueue(request)
    except IdempotencyKeyConflictError:
        ...  # the key was used for another payload
    except SeppError as err:
        print(err.code, err.reason, err.message, err.metadata)

The reason (``err.reason``, e.g. ``"IDEMPOTENCY_KEY_TOO_LONG"``) is the
stable name the server puts in its ``google.rpc.ErrorInfo`` detail; the class
is chosen from it, never from the message. The reasons are the values of the
proto enum ``sepp.v1.Reason`` (:mod:`sepp.v1.reason_pb2`), the one list of
them: each class below is registered for its value of the generated enum, so
a reason the enum no longer has fails at import, and ``tests/test_reasons.py``
fails when the enum has one that no class stands for. A reason this version
of the client does not know still arrives as a plain :class:`SeppError`
carrying it.
"""

from __future__ import annotations

from typing import Callable, ClassVar, Dict, List, Mapping, Optional, Sequence, Type, TypeVar

from .v1 import reason_pb2

__all__ = [
    "SeppError",
    "IdempotencyKeyTooLongError",
    "IdempotencyKeyEmptyError",
    "IdempotencyKeyConflictError",
    "IdempotencyKeyRequiredError",
    "UnknownQueueError",
    "UnknownJobTypeError",
    "PayloadTooLargeError",
    "BatchTooLargeError",
    "InvalidFieldError",
    "JobNotFoundError",
    "NotDeadError",
    "LeaseLostError",
    "EffectInProgressError",
    "DuplicateJobError",
    "DedupRuleViolatedError",
    "UnauthenticatedError",
    "PermissionDeniedError",
    "LimitExceededError",
    "UnavailableError",
    "InternalError",
    "BackupUnsupportedError",
    "InvalidEffectKeyError",
    "error_for",
]


class SeppError(Exception):
    """Base class of every error of the Sepp client.

    Attributes:
        code: the Connect code name, e.g. ``"invalid_argument"``.
        reason: the stable reason, e.g. ``"IDEMPOTENCY_KEY_TOO_LONG"``.
        message: what went wrong and what to do, as the server (or the
            client's own check) wrote it.
        metadata: the ErrorInfo metadata, e.g. ``{"index": "1"}`` for an
            atomic batch or ``{"field": "queue"}``.
        index: the failing job of an atomic batch (from ``metadata["index"]``),
            or None.
        unsent: True when the request certainly never left the client.
    """

    #: The reason this class stands for; the base class has none of its own.
    REASON: ClassVar[str] = ""
    #: The Connect code the server uses for this reason.
    CODE: ClassVar[str] = "unknown"

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = None,
        reason: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.code: str = code or self.CODE
        self.reason: str = reason or self.REASON or "UNKNOWN"
        self.message: str = message
        self.metadata: Dict[str, str] = dict(metadata or {})
        #: True when the request certainly never reached the server (the
        #: connection could not be opened), so even an unkeyed enqueue may
        #: be resent.
        self.unsent: bool = False
        super().__init__(f"{self.reason}: {message}")

    @property
    def index(self) -> Optional[int]:
        """The failing job of an atomic batch, or None."""
        raw = self.metadata.get("index")
        try:
            return int(raw) if raw is not None else None
        except ValueError:
            return None

    @property
    def retryable(self) -> bool:
        """True when the outcome of the call is unknown (the server may or may
        not have written it): a keyed enqueue is then safe to resend."""
        return self.reason == UnavailableError.REASON

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, reason={self.reason!r}, message={self.message!r})"


#: The class of each reason, by the reason's name; filled by _for_reason.
_BY_REASON: Dict[str, Type[SeppError]] = {}

_E = TypeVar("_E", bound=Type[SeppError])


def _for_reason(reason: int) -> Callable[[_E], _E]:
    """Registers the decorated class as the one of ``reason``, a value of
    the generated enum; its REASON is the value's name, as the wire carries
    it."""

    def register(cls: _E) -> _E:
        name = reason_pb2.Reason.Name(reason)
        if name in _BY_REASON:
            raise TypeError(f"{cls.__name__} and {_BY_REASON[name].__name__} both stand for {name}")
        cls.REASON = name
        _BY_REASON[name] = cls
        return cls

    return register


@_for_reason(reason_pb2.IDEMPOTENCY_KEY_TOO_LONG)
class IdempotencyKeyTooLongError(SeppError):
    """The key is longer than ``max_idempotency_key_bytes`` (256 by default),
    counted in bytes of UTF-8 (the seed's ``IdempotencyKeyTooLong``)."""

    CODE = "invalid_argument"


@_for_reason(reason_pb2.IDEMPOTENCY_KEY_EMPTY)
class IdempotencyKeyEmptyError(SeppError):
    """A key was given but is empty. Pass ``idempotency_key=None`` (the
    default) to enqueue without a key; an empty string is refused, since it
    usually means the value meant for the key was missing."""

    CODE = "invalid_argument"


@_for_reason(reason_pb2.IDEMPOTENCY_KEY_CONFLICT)
class IdempotencyKeyConflictError(SeppError):
    """The key is recorded with a different job type or payload on a queue
    with ``key_reuse = "reject_mismatch"``. Nothing was written."""

    CODE = "already_exists"


@_for_reason(reason_pb2.IDEMPOTENCY_KEY_REQUIRED)
class IdempotencyKeyRequiredError(SeppError):
    """The queue has ``require_key = true`` and the job has no key, given or
    derived."""

    CODE = "invalid_argument"


@_for_reason(reason_pb2.UNKNOWN_QUEUE)
class UnknownQueueError(SeppError):
    """The queue is not declared and the server runs with ``strict = true``;
    or ``pause_queue`` / ``resume_queue`` named a queue the server does not
    know, without ``create=True`` (``metadata["queue"]`` names it)."""

    CODE = "not_found"


@_for_reason(reason_pb2.UNKNOWN_JOB_TYPE)
class UnknownJobTypeError(SeppError):
    """The job type is not in the queue's ``job_types`` allow-list."""

    CODE = "invalid_argument"


@_for_reason(reason_pb2.PAYLOAD_TOO_LARGE)
class PayloadTooLargeError(SeppError):
    """The payload (or a result) exceeds ``max_payload_bytes``."""

    CODE = "invalid_argument"


@_for_reason(reason_pb2.BATCH_TOO_LARGE)
class BatchTooLargeError(SeppError):
    """The batch has more jobs than ``max_batch_size``."""

    CODE = "invalid_argument"


@_for_reason(reason_pb2.INVALID_FIELD)
class InvalidFieldError(SeppError):
    """Another field is malformed; the message (and ``metadata["field"]``)
    names it."""

    CODE = "invalid_argument"


@_for_reason(reason_pb2.JOB_NOT_FOUND)
class JobNotFoundError(SeppError):
    """No job has this id: it never existed, or retention deleted it."""

    CODE = "not_found"


class NotDeadError(JobNotFoundError):
    """Raised by ``requeue_dead_jobs`` and ``purge_dead_jobs`` when some of
    the ``job_ids`` given named no dead job (of ``queue``, when given):
    unknown, deleted, or in another state. The others were requeued or purged
    all the same. It is a :class:`JobNotFoundError`, as the Go client's
    ``*sepp.NotDeadError`` is ``errors.Is(err, sepp.ErrJobNotFound)``::

        try:
            n = await client.requeue_dead_jobs(job_ids=ids)
        except NotDeadError as err:
            n = err.count                # requeued all the same
            print("no dead job with id", ", ".join(err.job_ids))

    Attributes:
        job_ids: those ids, each once, in the order given. Nothing was done
            to them.
        count: how many of the other jobs were requeued (or purged).
    """

    def __init__(self, job_ids: Sequence[str], count: int) -> None:
        self.job_ids: List[str] = list(job_ids)
        self.count: int = count
        super().__init__("no dead job with id " + ", ".join(self.job_ids))


@_for_reason(reason_pb2.LEASE_LOST)
class LeaseLostError(SeppError):
    """The lease token no longer holds the job's (or the effect's) lease:
    another delivery owns it now. Stop working on it."""

    CODE = "failed_precondition"


@_for_reason(reason_pb2.EFFECT_IN_PROGRESS)
class EffectInProgressError(SeppError):
    """Another holder is running the effect (``effect.do(..., mode="raise")``).
    The worker runtime retries a job that fails with it after one second."""

    CODE = "aborted"


@_for_reason(reason_pb2.DUPLICATE_JOB)
class DuplicateJobError(SeppError):
    """A dedup hit on a queue with ``on_duplicate = "reject"``;
    ``metadata["job_id"]`` names the original."""

    CODE = "already_exists"


@_for_reason(reason_pb2.DEDUP_RULE_VIOLATED)
class DedupRuleViolatedError(SeppError):
    """A ``[[queues.rules]]`` rule with ``action = "reject"`` found its limit
    of jobs enqueued on the queue within its window. ``metadata`` has
    ``rule``, ``limit``, ``frees_at`` (when the window has room again), and,
    when the limit is 1, ``job_id`` (the job that holds it). A rule with
    ``action = "delay"`` raises nothing: the ack's ``delayed_until`` says
    when the job runs."""

    CODE = "failed_precondition"


@_for_reason(reason_pb2.UNAUTHENTICATED)
class UnauthenticatedError(SeppError):
    """No bearer token, or one that matches none, while the server's
    ``[auth]`` is on."""

    CODE = "unauthenticated"


@_for_reason(reason_pb2.PERMISSION_DENIED)
class PermissionDeniedError(SeppError):
    """The token's roles or queues do not cover this call."""

    CODE = "permission_denied"


@_for_reason(reason_pb2.LIMIT_EXCEEDED)
class LimitExceededError(SeppError):
    """A server limit (queues per reserve, long polls, connections); the
    message names the config key."""

    CODE = "resource_exhausted"


@_for_reason(reason_pb2.UNAVAILABLE)
class UnavailableError(SeppError):
    """The server could not be reached, or the call ended before its write
    was acknowledged: the outcome is unknown. A keyed enqueue is safe to
    resend with the same key (the client does so by itself)."""

    CODE = "unavailable"


@_for_reason(reason_pb2.INTERNAL)
class InternalError(SeppError):
    """The server failed (a bug or a storage failure), or answered something
    the client cannot read; the message says which."""

    CODE = "internal"


@_for_reason(reason_pb2.BACKUP_UNSUPPORTED)
class BackupUnsupportedError(SeppError):
    """A backup asked of a server whose store cannot copy itself (the
    PostgreSQL backend): back its database up with PostgreSQL's own tools."""

    CODE = "failed_precondition"


class InvalidEffectKeyError(InvalidFieldError):
    """An effect scope or key is empty, longer than 256 bytes of UTF-8, or
    not a string. Raised by :func:`sepp.effect.do` before anything is sent;
    the effect did not run."""


# Reasons for errors that carry none, by Connect code (as the Go client).
_REASON_BY_CODE = {
    "unavailable": UnavailableError.REASON,
    "deadline_exceeded": UnavailableError.REASON,
    "not_found": JobNotFoundError.REASON,
    "unauthenticated": UnauthenticatedError.REASON,
    "permission_denied": PermissionDeniedError.REASON,
}


def error_for(
    code: str,
    reason: Optional[str],
    message: str,
    metadata: Optional[Mapping[str, str]] = None,
) -> SeppError:
    """Builds the exception for a reason (or, without one, for a code)."""
    if not reason:
        reason = _REASON_BY_CODE.get(code, InternalError.REASON)
    cls = _BY_REASON.get(reason, SeppError)
    return cls(message, code=code, reason=reason, metadata=metadata)
