"""The client's data types: requests and answers as dataclasses.

Times are timezone-aware :class:`datetime.datetime` values in UTC; durations
are seconds (``float``) or :class:`datetime.timedelta`; payloads and results
are ``bytes``. Each type is read from (or, for a request, made into) the
message protoc generates for it (:mod:`sepp.v1`).
"""

from __future__ import annotations

import enum
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Dict, List, Optional, Union

from . import _wire
from .errors import SeppError
from .v1 import admin_pb2, effect_pb2, job_pb2, worker_pb2

__all__ = [
    "EnqueueRequest",
    "Ack",
    "BatchResult",
    "JobState",
    "JobHold",
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


def payload_bytes(payload: Payload) -> bytes:
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
        self.payload = payload_bytes(self.payload)

    def to_proto(self) -> job_pb2.EnqueueRequest:
        """The request as the message sent (an ``sepp.v1.EnqueueRequest``)."""
        out = job_pb2.EnqueueRequest(
            queue=self.queue,
            job_type=self.job_type,
            payload=self.payload,  # type: ignore[arg-type]
            priority=int(self.priority),
            max_attempts=int(self.max_attempts),
            headers={str(k): str(v) for k, v in self.headers.items()},
        )
        if self.idempotency_key is not None:
            # Set even when empty (the field is optional, so "set to empty"
            # reaches the server): the server then refuses it, which is the
            # point (an empty key must never silently mean "no key").
            out.idempotency_key = self.idempotency_key
        if self.run_at is not None:
            when = self.run_at
            if isinstance(when, timedelta):
                when = datetime.now(timezone.utc) + when
            out.run_at.CopyFrom(_wire.timestamp(when))
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
        idempotency_key: the key the enqueue was judged by: the request's,
            or the one the server derived from the payload on a queue with
            ``key_fields`` (or ``dedup_by_content``), to look the job up or
            release its key later; None for an enqueue without a key.
        follows_job_id: on a queue with ``when_running = "run_again"``, the
            key's job was running, so this enqueue created a follow-up
            (``job_id``, ``deduplicated`` False) that runs once the job
            named here has ended; None otherwise.
        delayed_until: a ``[[queues.rules]]`` rule with ``action = "delay"``
            found its window full, so the job was accepted for this time,
            the first moment the window has room; None otherwise.
    """

    job_id: str
    deduplicated: bool = False
    payload_mismatch: bool = False
    original_enqueued_at: Optional[datetime] = None
    dedup_expires_at: Optional[datetime] = None
    replaced: bool = False
    idempotency_key: Optional[str] = None
    follows_job_id: Optional[str] = None
    delayed_until: Optional[datetime] = None

    @classmethod
    def from_proto(cls, m: job_pb2.EnqueueResponse) -> "Ack":
        """Reads an ``sepp.v1.EnqueueResponse``."""
        return cls(
            job_id=m.job_id,
            deduplicated=m.deduplicated,
            payload_mismatch=m.payload_mismatch,
            original_enqueued_at=_wire.datetime_of(m, "original_enqueued_at"),
            dedup_expires_at=_wire.datetime_of(m, "dedup_expires_at"),
            replaced=m.replaced,
            # A key is never empty, so empty means none.
            idempotency_key=m.idempotency_key or None,
            follows_job_id=m.follows_job_id or None,
            delayed_until=_wire.datetime_of(m, "delayed_until"),
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
    def parse(cls, value: int) -> "JobState":
        """Reads a ``sepp.v1.JobState`` number; one this version does not
        know is UNSPECIFIED."""
        try:
            return cls(job_pb2.JobState.Name(value))
        except ValueError:
            return cls.UNSPECIFIED

    def to_proto(self) -> "job_pb2.JobState":
        """The ``sepp.v1.JobState`` number."""
        return job_pb2.JobState.Value(self.value)

    @property
    def finished(self) -> bool:
        """True for COMPLETED, DEAD and CANCELLED."""
        return self in (JobState.COMPLETED, JobState.DEAD, JobState.CANCELLED)


class JobHold(str, enum.Enum):
    """What holds back a job whose run-at has come (:attr:`Job.held_by`)."""

    #: A follow-up (``when_running = "run_again"``) waiting for the job it
    #: follows (:attr:`Job.follows_job_id`) to end.
    FOLLOW_UP = "follow_up"
    #: Its concurrency key is at its limit (or, on an ordered queue, an
    #: earlier job of its key has not finished).
    CONCURRENCY = "concurrency"
    #: Its rate key had its limit of jobs reserved within the period; until
    #: :attr:`Job.held_until`.
    RATE = "rate"

    @classmethod
    def parse(cls, value: int) -> "Optional[JobHold]":
        """Reads a ``sepp.v1.JobHold`` number: None for
        ``JOB_HOLD_UNSPECIFIED`` (nothing holds the job) and for a hold this
        version does not know."""
        return _holds.get(value)


_holds = {
    job_pb2.JOB_HOLD_FOLLOW_UP: JobHold.FOLLOW_UP,
    job_pb2.JOB_HOLD_CONCURRENCY: JobHold.CONCURRENCY,
    job_pb2.JOB_HOLD_RATE: JobHold.RATE,
}


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
        follows_job_id: a waiting follow-up (``when_running = "run_again"``):
            the job whose end it waits for; None otherwise.
        concurrency_key, rate_key: the job's keys under its queue's
            ``[queues.concurrency]`` and ``[queues.rate]``: JSON of the key
            fields' values. None on queues without them, and where the limit
            is the whole queue's (no key fields).
        held_by: what holds the job back although its run-at has come, or
            None when nothing does. A waiting follow-up is SCHEDULED with
            ``JobHold.FOLLOW_UP``.
        held_until: with ``JobHold.RATE``, when its key's rate window has
            room again; None otherwise.
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
    follows_job_id: Optional[str] = None
    concurrency_key: Optional[str] = None
    rate_key: Optional[str] = None
    held_by: Optional[JobHold] = None
    held_until: Optional[datetime] = None

    @classmethod
    def from_proto(cls, m: job_pb2.Job) -> "Job":
        """Reads an ``sepp.v1.Job``."""
        return cls(
            job_id=m.job_id,
            queue=m.queue,
            job_type=m.job_type,
            payload=m.payload,
            idempotency_key=m.idempotency_key if m.HasField("idempotency_key") else None,
            priority=m.priority,
            run_at=_wire.datetime_of(m, "run_at"),
            max_attempts=m.max_attempts,
            attempts=m.attempts,
            headers=dict(m.headers),
            state=JobState.parse(m.state),
            created_at=_wire.datetime_of(m, "created_at"),
            finalized_at=_wire.datetime_of(m, "finalized_at"),
            result=m.result,
            last_error=m.last_error,
            follows_job_id=m.follows_job_id or None,
            concurrency_key=m.concurrency_key or None,
            rate_key=m.rate_key or None,
            held_by=JobHold.parse(m.held_by),
            held_until=_wire.datetime_of(m, "held_until"),
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
        policy: the queue's dedup policy where it is not the default, e.g.
            ``on_duplicate=reject key_fields=["/account","/amount"]``.
        idempotency_key: the key looked up: the one given, or the one the
            server derived from the payload given
            (:meth:`~sepp.SeppClient.lookup_idempotency_key_by_payload`);
            set whether or not a record was found.
    """

    found: bool
    job_id: str = ""
    first_enqueued_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None
    hits: int = 0
    state: JobState = JobState.UNSPECIFIED
    result: bytes = b""
    policy: str = ""
    idempotency_key: str = ""

    @classmethod
    def from_proto(cls, m: job_pb2.LookupIdempotencyKeyResponse) -> "KeyLookup":
        """Reads an ``sepp.v1.LookupIdempotencyKeyResponse``."""
        return cls(
            found=m.found,
            job_id=m.job_id,
            first_enqueued_at=_wire.datetime_of(m, "first_enqueued_at"),
            expires_at=_wire.datetime_of(m, "expires_at"),
            hits=m.hits,
            state=JobState.parse(m.state),
            result=m.result,
            policy=m.policy,
            idempotency_key=m.idempotency_key,
        )


@dataclass(frozen=True)
class KeyRelease:
    """The answer to releasing an idempotency key.

    Attributes:
        released: False when there was no live record to release.
        job_id: the job the released record pointed to.
        idempotency_key: the key released: the one given, or the one the
            server derived from the payload given
            (:meth:`~sepp.SeppClient.release_idempotency_key_by_payload`).
    """

    released: bool
    job_id: str = ""
    idempotency_key: str = ""

    @classmethod
    def from_proto(cls, m: job_pb2.ReleaseIdempotencyKeyResponse) -> "KeyRelease":
        """Reads an ``sepp.v1.ReleaseIdempotencyKeyResponse``."""
        return cls(released=m.released, job_id=m.job_id, idempotency_key=m.idempotency_key)


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
    def from_proto(cls, m: worker_pb2.ReservedJob) -> "Reservation":
        """Reads an ``sepp.v1.ReservedJob``."""
        return cls(
            job=Job.from_proto(m.job),
            lease_token=m.lease_token,
            attempt=m.attempt,
            lease_expires_at=_wire.datetime_of(m, "lease_expires_at"),
            lease=m.lease_ms / 1000.0,
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
    def parse(cls, value: int) -> "EffectState":
        """Reads a ``sepp.v1.ClaimOutcome`` number; one this version does
        not know is UNSPECIFIED."""
        try:
            return cls(effect_pb2.ClaimOutcome.Name(value))
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
    delivery is paused.

    ``held_follow_up``, ``held_concurrency`` and ``held_rate`` count the jobs
    whose run-at has come that are held back (counted in ``scheduled`` too):
    follow-ups waiting for the job they follow, and jobs held by their key's
    ``[queues.concurrency]`` or ``[queues.rate]``."""

    name: str
    scheduled: int = 0
    available: int = 0
    reserved: int = 0
    completed: int = 0
    dead: int = 0
    cancelled: int = 0
    dedup_records: int = 0
    paused: bool = False
    held_follow_up: int = 0
    held_concurrency: int = 0
    held_rate: int = 0

    @classmethod
    def from_proto(cls, m: admin_pb2.QueueInfo) -> "QueueInfo":
        """Reads an ``sepp.v1.QueueInfo``."""
        return cls(
            name=m.name,
            scheduled=m.scheduled,
            available=m.available,
            reserved=m.reserved,
            completed=m.completed,
            dead=m.dead,
            cancelled=m.cancelled,
            dedup_records=m.dedup_records,
            paused=m.paused,
            held_follow_up=m.held_follow_up,
            held_concurrency=m.held_concurrency,
            held_rate=m.held_rate,
        )


@dataclass(frozen=True)
class JobPage:
    """One page of :meth:`SeppClient.list_jobs`, oldest first.
    ``next_page_token`` is empty on the last page."""

    jobs: List[Job]
    next_page_token: str = ""
