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

The package has four parts:

- :class:`SeppClient` (``sepp.client``): enqueue (one, concurrent calls
  batched for you, or an explicit batch), jobs, idempotency keys, and the
  lower-level worker, effect and admin calls;
- :class:`Worker` (``sepp.worker``): the worker runtime;
- ``sepp.effect``: ``await effect.do(client, scope, key, fn)``, handler-side
  idempotency for external effects;
- :func:`derive_key` (``sepp.jsonkey``): the idempotency key a queue's
  ``key_fields`` derive from a JSON payload, as the server derives it.

Every error is a :class:`SeppError`, of the subclass of its reason
(``sepp.errors``).
"""

from . import effect
from .client import DEFAULT_ADDRESS, RetryPolicy, SeppClient, check_idempotency_key
from .jsonkey import DeriveKeyError, derive_key
from .errors import (
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
    JobPage,
    JobState,
    KeyLookup,
    KeyRelease,
    QueueInfo,
    Reservation,
)
from .worker import DeliveredJob, PermanentError, RetryAfterError, Worker

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_ADDRESS",
    "SeppClient",
    "RetryPolicy",
    "check_idempotency_key",
    "derive_key",
    "DeriveKeyError",
    "EnqueueRequest",
    "Ack",
    "BatchResult",
    "Job",
    "JobState",
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
    "InvalidEffectKeyError",
]
