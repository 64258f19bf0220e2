"""The client's data types: requests and answers as dataclasses.

Times are timezone-aware :class:`datetime.datetime` values in UTC; durations
are seconds (``float``) or :class:`datetime.timedelta`; payloads and results
are ``bytes``.
"""

from __future__ import annotations

import enum
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _wire
from .errors import SeppError

__all__ = [
    "EnqueueRequest",
    "Ack",
    "BatchResult",
    "JobState",
    "Job",
    "KeyLookup",
    "KeyRelease",
    "Reservation",
    "FailResult",
    "Completion",
    "EffectState",
    "EffectClaim",
    "EffectRecord",
    "QueueInfo",
    "JobPage",
]

Payload = Union[bytes, bytearray, memoryview, str]


def _payload_bytes(payload: Payload) -> bytes:
    """A payload as bytes (a str is encoded as UTF-8)."""
    if isinstance(payload, str):
        return payload.encode("utf-8")
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    raise TypeError(f"payload must be bytes or str, not {type(payload).__name__}")


@dataclass
class EnqueueRequest:
    """One job to enqueue.

    ``queue`` and ``job_type`` are positional; every other field is a keyword::

        EnqueueRequest("emails", "receipt", idempotency_key="receipt-order-8a3f")
        EnqueueRequest("emails", "receipt", payload=b'{"order": "8a3f"}', priority=5,
                       run_at=datetime.now(timezone.utc) + timedelta(minutes=5),
                       max_attempts=3, headers={"trace-id": "abc"})

    Attributes:
        queue: the queue's name.
        job_type: what kind of job this is; workers pick handlers by it.
        payload: opaque bytes (a ``str`` is encoded as UTF-8). Default empty.
        idempotency_key: makes the enqueue safe to retry: within the queue's
            dedup window an enqueue with a recorded key returns the original
            job. ``None`` (the default) means no key. An empty string is an
            error (:class:`~sepp.IdempotencyKeyEmptyError`), never "no key".
            1 to 256 bytes of UTF-8 (the server's ``max_idempotency_key_bytes``).
        priority: higher runs first. Default 0.
        run_at: not before this time (an aware datetime), or a timedelta from
            now. ``None``: now.
        max_attempts: overrides the queue's ``max_attempts``. 0: the queue's.
        headers: string metadata carried with the job.
    """

    queue: str
    job_type: str
    _: KW_ONLY
    payload: Payload = b""
    idempotency_key: Optional[str] = None
    priority: int = 0
    run_at: Optional[Union[datetime, timedelta]] = None
    max_attempts: int = 0
    headers: Dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("queue", "job_type"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a str, not {type(getattr(self, name)).__name__}")
        if self.idempotency_key is not None and not isinstance(self.idempotency_key, str):
            raise TypeError(
                f"idempotency_key must be a str or None, not {type(self.idempotency_key).__name__}"
            )
        if self.run_at is not None and not isinstance(self.run_at, (datetime, timedelta)):
            raise TypeError(f"run_at must be a datetime or timedelta, not {type(self.run_at).__name__}")
        self.payload = _payload_bytes(self.payload)

    def to_json(self) -> Dict[str, Any]:
        """The request as Connect JSON (an ``sepp.v1.EnqueueRequest``)."""
        out: Dict[str, Any] = {"queue": self.queue, "jobType": self.job_type}
        if self.payload:
            out["payload"] = _wire.b64encode(self.payload)  # type: ignore[arg-type]
        if self.idempotency_key is not None:
            # Sent even when empty: the server then refuses it, which is the
            # point (an empty key must never silently mean "no key").
            out["idempotencyKey"] = self.idempotency_key
        if self.priority:
            out["priority"] = int(self.priority)
        if self.run_at is not None:
            when = self.run_at
            if isinstance(when, timedelta):
                from datetime import timezone

                when = datetime.now(timezone.utc) + when
            out["runAt"] = _wire.format_timestamp(when)
        if self.max_attempts:
            out["maxAttempts"] = int(self.max_attempts)
        if self.headers:
            out["headers"] = {str(k): str(v) for k, v in self.headers.items()}
        return out


@dataclass(frozen=True)
class Ack:
    """The server's answer to an enqueue.

    Attributes:
        job_id: the new job, or on a hit the original job (which may since
            have run, been dead-lettered or been deleted by retention).
        deduplicated: "this enqueue is already accounted for": the key was
            recorded, and no job was created.
        payload_mismatch: on a hit, the original was enqueued with a
            different job type or payload.
        original_enqueued_at: on a hit, when the original was enqueued.
        dedup_expires_at: for keyed enqueues, when the key stops being
            honoured.
        replaced: on a hit on a queue with ``on_duplicate = "replace"`` or
            ``"debounce"``, the waiting original took this request's
            payload, headers, priority and run-at.
    """

    job_id: str
    deduplicated: bool = False
    payload_mismatch: bool = False
    original_enqueued_at: Optional[datetime] = None
    dedup_expires_at: Optional[datetime] = None
    replaced: bool = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Ack":
        """Reads an ``sepp.v1.EnqueueResponse``."""
        return cls(
            job_id=str(d.get("jobId", "")),
            deduplicated=bool(d.get("deduplicated", False)),
            payload_mismatch=bool(d.get("payloadMismatch", False)),
            original_enqueued_at=_wire.parse_timestamp(d.get("originalEnqueuedAt")),
            dedup_expires_at=_wire.parse_timestamp(d.get("dedupExpiresAt")),
            replaced=bool(d.get("replaced", False)),
        )


@dataclass(frozen=True)
class BatchResult:
    """The outcome of one job of a batch: an ``ack`` or an ``error``.

    Results come in the order of the requests.
    """

    ack: Optional[Ack] = None
    error: Optional[SeppError] = None

    @property
    def ok(self) -> bool:
        """True when the job was enqueued (or was a dedup hit)."""
        return self.error is None

    def unwrap(self) -> Ack:
        """Returns the ack, or raises the item's error."""
        if self.error is not None:
            raise self.error
        assert self.ack is not None
        return self.ack


class JobState(str, enum.Enum):
    """Where a job is in its lifecycle. ``DELETED`` is reported by a key
    lookup when the job is gone but its dedup record still lives."""

    UNSPECIFIED = "JOB_STATE_UNSPECIFIED"
    SCHEDULED = "JOB_STATE_SCHEDULED"
    AVAILABLE = "JOB_STATE_AVAILABLE"
    RESERVED = "JOB_STATE_RESERVED"
    COMPLETED = "JOB_STATE_COMPLETED"
    DEAD = "JOB_STATE_DEAD"
    CANCELLED = "JOB_STATE_CANCELLED"
    DELETED = "JOB_STATE_DELETED"

    @classmethod
    def parse(cls, value: Any) -> "JobState":
        """Reads a protojson enum value (its name, or its number)."""
        if value is None or value == "":
            return cls.UNSPECIFIED
        if isinstance(value, int):
            return list(cls)[value] if 0 <= value < len(cls) else cls.UNSPECIFIED
        try:
            return cls(value)
        except ValueError:
            return cls.UNSPECIFIED

    @property
    def finished(self) -> bool:
        """True for COMPLETED, DEAD and CANCELLED."""
        return self in (JobState.COMPLETED, JobState.DEAD, JobState.CANCELLED)


@dataclass(frozen=True)
class Job:
    """A job as the server stores it.

    Attributes:
        job_id, queue, job_type, payload: what was enqueued.
        idempotency_key: the key it was enqueued with, or None.
        priority, run_at, max_attempts, headers: as enqueued (run_at as the
            server set it).
        attempts: deliveries so far; counts up on every reserve.
        state: where the job is now.
        created_at: when it was enqueued.
        finalized_at: when it reached COMPLETED, DEAD or CANCELLED, or None.
        result: the result passed to complete, if any.
        last_error: the error of the last failed attempt, or why it is dead.
    """

    job_id: str
    queue: str
    job_type: str
    payload: bytes = b""
    idempotency_key: Optional[str] = None
    priority: int = 0
    run_at: Optional[datetime] = None
    max_attempts: int = 0
    attempts: int = 0
    headers: Dict[str, str] = field(default_factory=dict)
    state: JobState = JobState.UNSPECIFIED
    created_at: Optional[datetime] = None
    finalized_at: Optional[datetime] = None
    result: bytes = b""
    last_error: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Job":
        """Reads an ``sepp.v1.Job``."""
        return cls(
            job_id=str(d.get("jobId", "")),
            queue=str(d.get("queue", "")),
            job_type=str(d.get("jobType", "")),
            payload=_wire.b64decode(d.get("payload")),
            idempotency_key=d.get("idempotencyKey"),
            priority=_wire.as_int(d.get("priority")),
            run_at=_wire.parse_timestamp(d.get("runAt")),
            max_attempts=_wire.as_int(d.get("maxAttempts")),
            attempts=_wire.as_int(d.get("attempts")),
            headers=dict(d.get("headers") or {}),
            state=JobState.parse(d.get("state")),
            created_at=_wire.parse_timestamp(d.get("createdAt")),
            finalized_at=_wire.parse_timestamp(d.get("finalizedAt")),
            result=_wire.b64decode(d.get("result")),
            last_error=str(d.get("lastError", "")),
        )


@dataclass(frozen=True)
class KeyLookup:
    """What the server knows of an idempotency key.

    Attributes:
        found: False when no live record exists (never enqueued, expired or
            released); the other fields are then empty.
        job_id: the job the key points to.
        first_enqueued_at, expires_at: the record's window.
        hits: enqueues deduplicated against this record so far.
        state: the job's state now, or ``JobState.DELETED`` when it is gone.
        result: the job's result, if it completed with one.
    """

    found: bool
    job_id: str = ""
    first_enqueued_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None
    hits: int = 0
    state: JobState = JobState.UNSPECIFIED
    result: bytes = b""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "KeyLookup":
        """Reads an ``sepp.v1.LookupIdempotencyKeyResponse``."""
        return cls(
            found=bool(d.get("found", False)),
            job_id=str(d.get("jobId", "")),
            first_enqueued_at=_wire.parse_timestamp(d.get("firstEnqueuedAt")),
            expires_at=_wire.parse_timestamp(d.get("expiresAt")),
            hits=_wire.as_int(d.get("hits")),
            state=JobState.parse(d.get("state")),
            result=_wire.b64decode(d.get("result")),
        )


@dataclass(frozen=True)
class KeyRelease:
    """The answer to releasing an idempotency key.

    Attributes:
        released: False when there was no live record to release.
        job_id: the job the released record pointed to.
    """

    released: bool
    job_id: str = ""


@dataclass(frozen=True)
class Reservation:
    """One leased job, as :meth:`SeppClient.reserve` returns it.

    Attributes:
        job: the job.
        lease_token: must accompany complete, fail and extend_lease.
        attempt: the deliveries of this job, this one included.
        lease_expires_at: when the lease ends unless extended.
        lease: the length of the lease granted, in seconds.
    """

    job: Job
    lease_token: str
    attempt: int
    lease_expires_at: Optional[datetime]
    lease: float

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Reservation":
        """Reads an ``sepp.v1.ReservedJob``."""
        return cls(
            job=Job.from_json(d.get("job") or {}),
            lease_token=str(d.get("leaseToken", "")),
            attempt=_wire.as_int(d.get("attempt")),
            lease_expires_at=_wire.parse_timestamp(d.get("leaseExpiresAt")),
            lease=_wire.as_int(d.get("leaseMs")) / 1000.0,
        )


@dataclass(frozen=True)
class FailResult:
    """What became of a failed job: ``SCHEDULED`` (retried at
    ``next_run_at``) or ``DEAD``. ``already_failed`` is True when this Fail
    had been committed before (a resent call whose first answer was lost):
    nothing changed."""

    state: JobState
    next_run_at: Optional[datetime] = None
    already_failed: bool = False


@dataclass(frozen=True)
class Completion:
    """One job to complete in :meth:`SeppClient.complete_batch`."""

    job_id: str
    lease_token: str
    result: bytes = b""


class EffectState(str, enum.Enum):
    """The answer to a claim of an effect key."""

    UNSPECIFIED = "CLAIM_OUTCOME_UNSPECIFIED"
    #: The caller holds the key: run the effect, then complete or release it.
    ACQUIRED = "CLAIM_OUTCOME_ACQUIRED"
    #: The effect already ran: replay the stored result, do not run it.
    COMPLETED = "CLAIM_OUTCOME_COMPLETED"
    #: Another holder's lease is live.
    IN_PROGRESS = "CLAIM_OUTCOME_IN_PROGRESS"

    @classmethod
    def parse(cls, value: Any) -> "EffectState":
        """Reads a protojson enum value (its name, or its number)."""
        if value is None or value == "":
            return cls.UNSPECIFIED
        if isinstance(value, int):
            return list(cls)[value] if 0 <= value < len(cls) else cls.UNSPECIFIED
        try:
            return cls(value)
        except ValueError:
            return cls.UNSPECIFIED


@dataclass(frozen=True)
class EffectClaim:
    """The answer to :meth:`SeppClient.claim_effect`.

    Attributes:
        state: ACQUIRED, COMPLETED or IN_PROGRESS.
        token: holds the claim (ACQUIRED).
        result: the stored result (COMPLETED).
        lease_expires_at: when the holder's lease ends.
    """

    state: EffectState
    token: str = ""
    result: bytes = b""
    lease_expires_at: Optional[datetime] = None


@dataclass(frozen=True)
class EffectRecord:
    """What the server knows of an effect key (:meth:`SeppClient.get_effect`)."""

    found: bool
    state: EffectState = EffectState.UNSPECIFIED
    result: bytes = b""
    completed_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None


@dataclass(frozen=True)
class QueueInfo:
    """A queue: its jobs by state, its live dedup records, and whether
    delivery is paused."""

    name: str
    scheduled: int = 0
    available: int = 0
    reserved: int = 0
    completed: int = 0
    dead: int = 0
    cancelled: int = 0
    dedup_records: int = 0
    paused: bool = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "QueueInfo":
        """Reads an ``sepp.v1.QueueInfo``."""
        return cls(
            name=str(d.get("name", "")),
            scheduled=_wire.as_int(d.get("scheduled")),
            available=_wire.as_int(d.get("available")),
            reserved=_wire.as_int(d.get("reserved")),
            completed=_wire.as_int(d.get("completed")),
            dead=_wire.as_int(d.get("dead")),
            cancelled=_wire.as_int(d.get("cancelled")),
            dedup_records=_wire.as_int(d.get("dedupRecords")),
            paused=bool(d.get("paused", False)),
        )


@dataclass(frozen=True)
class JobPage:
    """One page of :meth:`SeppClient.list_jobs`, oldest first.
    ``next_page_token`` is empty on the last page."""

    jobs: List[Job]
    next_page_token: str = ""
