"""Sepp for Python: the asyncio client of Sepp, a job queue whose retries
never become duplicates.

::

    import asyncio
    from sepp import SeppClient, EnqueueRequest

    async def main() -> None:
        client = await SeppClient.connect("http://localhost:50051")
        request = EnqueueRequest("emails", "receipt", idempotency_key="receipt-order-8a3f")
        ack = await client.enqueue(request)
        if ack.deduplicated:
            print(f"already enqueued earlier as {ack.job_id}")
        else:
            print(f"enqueued {ack.job_id}")

The package has three parts, each depending only on those before it:

- :class:`SeppClient` (``sepp.client``): enqueue (one, concurrent calls
  batched for you, or an explicit batch), jobs, idempotency keys (looked up
  or released by key, or by payload on a queue with ``key_fields``), and
  the lower-level worker, effect and admin calls;
- :class:`Worker` (``sepp.worker``): the worker runtime;
- ``sepp.effect``: ``await effect.do(client, scope, key, fn)``, handler-side
  idempotency for external effects.

Two modules are imported on their own, each for an edge of an app:

- ``sepp.idempotency``: :class:`~sepp.idempotency.IdempotencyMiddleware`,
  ASGI middleware that makes an app's own HTTP API safe to retry
  (``Idempotency-Key``), backed by effect keys;
- ``sepp.outbox``: ``outbox.enqueue(conn, request)``, a job written as a row
  of the app's own PostgreSQL database inside its transaction, for Sepp to
  relay.

Neither imports a web framework or a database driver.

Every error is a :class:`SeppError`, of the subclass of its reason
(``sepp.errors``; the reasons are those of the proto enum ``sepp.v1.Reason``).
Calls whose outcome is unknown are resent by the policy every Sepp client
shares (``sepp.retry``). The wire messages are generated from the protos
(``sepp.v1``).
"""

from . import effect
from .client import DEFAULT_ADDRESS, SeppClient, check_idempotency_key
from .errors import (
    BackupUnsupportedError,
    BatchTooLargeError,
    DedupRuleViolatedError,
    DuplicateJobError,
    EffectInProgressError,
    IdempotencyKeyConflictError,
    IdempotencyKeyEmptyError,
    IdempotencyKeyRequiredError,
    IdempotencyKeyTooLongError,
    InternalError,
    InvalidEffectKeyError,
    InvalidFieldError,
    JobNotFoundError,
    LeaseLostError,
    NotDeadError,
    LimitExceededError,
    PayloadTooLargeError,
    PermissionDeniedError,
    SeppError,
    UnauthenticatedError,
    UnavailableError,
    UnknownJobTypeError,
    UnknownQueueError,
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
    JobHold,
    JobPage,
    JobState,
    KeyLookup,
    KeyRelease,
    QueueInfo,
    Reservation,
)
from .retry import RetryPolicy
from .worker import DeliveredJob, PermanentError, RetryAfterError, Worker

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_ADDRESS",
    "SeppClient",
    "RetryPolicy",
    "check_idempotency_key",
    "EnqueueRequest",
    "Ack",
    "BatchResult",
    "Job",
    "JobState",
    "JobHold",
    "JobPage",
    "KeyLookup",
    "KeyRelease",
    "Reservation",
    "FailResult",
    "Completion",
    "EffectClaim",
    "EffectRecord",
    "EffectState",
    "QueueInfo",
    "Worker",
    "DeliveredJob",
    "PermanentError",
    "RetryAfterError",
    "effect",
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
]
