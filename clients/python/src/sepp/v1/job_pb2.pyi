from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
JOB_HOLD_CONCURRENCY: JobHold
JOB_HOLD_FOLLOW_UP: JobHold
JOB_HOLD_RATE: JobHold
JOB_HOLD_UNSPECIFIED: JobHold
JOB_STATE_AVAILABLE: JobState
JOB_STATE_CANCELLED: JobState
JOB_STATE_COMPLETED: JobState
JOB_STATE_DEAD: JobState
JOB_STATE_DELETED: JobState
JOB_STATE_RESERVED: JobState
JOB_STATE_SCHEDULED: JobState
JOB_STATE_UNSPECIFIED: JobState

class BatchItemError(_message.Message):
    __slots__ = ["code", "message", "metadata", "reason"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    metadata: _containers.ScalarMap[str, str]
    reason: str
    def __init__(self, code: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ["job_id"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ["job"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class EnqueueBatchRequest(_message.Message):
    __slots__ = ["atomic", "jobs"]
    ATOMIC_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    atomic: bool
    jobs: _containers.RepeatedCompositeFieldContainer[EnqueueRequest]
    def __init__(self, jobs: _Optional[_Iterable[_Union[EnqueueRequest, _Mapping]]] = ..., atomic: bool = ...) -> None: ...

class EnqueueBatchResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[EnqueueBatchResult]
    def __init__(self, results: _Optional[_Iterable[_Union[EnqueueBatchResult, _Mapping]]] = ...) -> None: ...

class EnqueueBatchResult(_message.Message):
    __slots__ = ["ack", "error"]
    ACK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ack: EnqueueResponse
    error: BatchItemError
    def __init__(self, ack: _Optional[_Union[EnqueueResponse, _Mapping]] = ..., error: _Optional[_Union[BatchItemError, _Mapping]] = ...) -> None: ...

class EnqueueRequest(_message.Message):
    __slots__ = ["headers", "idempotency_key", "job_type", "max_attempts", "payload", "priority", "queue", "run_at"]
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RUN_AT_FIELD_NUMBER: _ClassVar[int]
    headers: _containers.ScalarMap[str, str]
    idempotency_key: str
    job_type: str
    max_attempts: int
    payload: bytes
    priority: int
    queue: str
    run_at: _timestamp_pb2.Timestamp
    def __init__(self, queue: _Optional[str] = ..., job_type: _Optional[str] = ..., payload: _Optional[bytes] = ..., idempotency_key: _Optional[str] = ..., priority: _Optional[int] = ..., run_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., max_attempts: _Optional[int] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class EnqueueResponse(_message.Message):
    __slots__ = ["dedup_expires_at", "deduplicated", "delayed_until", "follows_job_id", "idempotency_key", "job_id", "original_enqueued_at", "payload_mismatch", "replaced"]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    DEDUP_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    DELAYED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    FOLLOWS_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_ENQUEUED_AT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_MISMATCH_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    dedup_expires_at: _timestamp_pb2.Timestamp
    deduplicated: bool
    delayed_until: _timestamp_pb2.Timestamp
    follows_job_id: str
    idempotency_key: str
    job_id: str
    original_enqueued_at: _timestamp_pb2.Timestamp
    payload_mismatch: bool
    replaced: bool
    def __init__(self, job_id: _Optional[str] = ..., deduplicated: bool = ..., payload_mismatch: bool = ..., original_enqueued_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., dedup_expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., replaced: bool = ..., idempotency_key: _Optional[str] = ..., follows_job_id: _Optional[str] = ..., delayed_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ["job_id"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ["job"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ["attempts", "concurrency_key", "created_at", "finalized_at", "follows_job_id", "headers", "held_by", "held_until", "idempotency_key", "job_id", "job_type", "last_error", "max_attempts", "payload", "priority", "queue", "rate_key", "result", "run_at", "state"]
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    FINALIZED_AT_FIELD_NUMBER: _ClassVar[int]
    FOLLOWS_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    HELD_BY_FIELD_NUMBER: _ClassVar[int]
    HELD_UNTIL_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RATE_KEY_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RUN_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    attempts: int
    concurrency_key: str
    created_at: _timestamp_pb2.Timestamp
    finalized_at: _timestamp_pb2.Timestamp
    follows_job_id: str
    headers: _containers.ScalarMap[str, str]
    held_by: JobHold
    held_until: _timestamp_pb2.Timestamp
    idempotency_key: str
    job_id: str
    job_type: str
    last_error: str
    max_attempts: int
    payload: bytes
    priority: int
    queue: str
    rate_key: str
    result: bytes
    run_at: _timestamp_pb2.Timestamp
    state: JobState
    def __init__(self, job_id: _Optional[str] = ..., queue: _Optional[str] = ..., job_type: _Optional[str] = ..., payload: _Optional[bytes] = ..., idempotency_key: _Optional[str] = ..., priority: _Optional[int] = ..., run_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., max_attempts: _Optional[int] = ..., attempts: _Optional[int] = ..., headers: _Optional[_Mapping[str, str]] = ..., state: _Optional[_Union[JobState, str]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finalized_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., result: _Optional[bytes] = ..., last_error: _Optional[str] = ..., follows_job_id: _Optional[str] = ..., concurrency_key: _Optional[str] = ..., rate_key: _Optional[str] = ..., held_by: _Optional[_Union[JobHold, str]] = ..., held_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LookupIdempotencyKeyRequest(_message.Message):
    __slots__ = ["idempotency_key", "payload", "queue"]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    payload: bytes
    queue: str
    def __init__(self, queue: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., payload: _Optional[bytes] = ...) -> None: ...

class LookupIdempotencyKeyResponse(_message.Message):
    __slots__ = ["expires_at", "first_enqueued_at", "found", "hits", "idempotency_key", "job_id", "policy", "result", "state"]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    FIRST_ENQUEUED_AT_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    expires_at: _timestamp_pb2.Timestamp
    first_enqueued_at: _timestamp_pb2.Timestamp
    found: bool
    hits: int
    idempotency_key: str
    job_id: str
    policy: str
    result: bytes
    state: JobState
    def __init__(self, found: bool = ..., job_id: _Optional[str] = ..., first_enqueued_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., hits: _Optional[int] = ..., state: _Optional[_Union[JobState, str]] = ..., result: _Optional[bytes] = ..., policy: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ReleaseIdempotencyKeyRequest(_message.Message):
    __slots__ = ["idempotency_key", "payload", "queue"]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    payload: bytes
    queue: str
    def __init__(self, queue: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., payload: _Optional[bytes] = ...) -> None: ...

class ReleaseIdempotencyKeyResponse(_message.Message):
    __slots__ = ["idempotency_key", "job_id", "released"]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    job_id: str
    released: bool
    def __init__(self, released: bool = ..., job_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class JobHold(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
