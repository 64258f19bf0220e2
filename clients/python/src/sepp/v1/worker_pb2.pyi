from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sepp.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompleteBatchRequest(_message.Message):
    __slots__ = ["completions"]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    completions: _containers.RepeatedCompositeFieldContainer[CompleteRequest]
    def __init__(self, completions: _Optional[_Iterable[_Union[CompleteRequest, _Mapping]]] = ...) -> None: ...

class CompleteBatchResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CompleteBatchResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CompleteBatchResult, _Mapping]]] = ...) -> None: ...

class CompleteBatchResult(_message.Message):
    __slots__ = ["already_completed", "error"]
    ALREADY_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    already_completed: bool
    error: _job_pb2.BatchItemError
    def __init__(self, error: _Optional[_Union[_job_pb2.BatchItemError, _Mapping]] = ..., already_completed: bool = ...) -> None: ...

class CompleteRequest(_message.Message):
    __slots__ = ["job_id", "lease_token", "result"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    result: bytes
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., result: _Optional[bytes] = ...) -> None: ...

class CompleteResponse(_message.Message):
    __slots__ = ["already_completed"]
    ALREADY_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    already_completed: bool
    def __init__(self, already_completed: bool = ...) -> None: ...

class ExtendLeaseRequest(_message.Message):
    __slots__ = ["job_id", "lease_ms", "lease_token"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_ms: int
    lease_token: str
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., lease_ms: _Optional[int] = ...) -> None: ...

class ExtendLeaseResponse(_message.Message):
    __slots__ = ["lease_expires_at"]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    lease_expires_at: _timestamp_pb2.Timestamp
    def __init__(self, lease_expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class FailRequest(_message.Message):
    __slots__ = ["error", "job_id", "lease_token", "permanent", "retry_after_ms"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PERMANENT_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    error: str
    job_id: str
    lease_token: str
    permanent: bool
    retry_after_ms: int
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., error: _Optional[str] = ..., retry_after_ms: _Optional[int] = ..., permanent: bool = ...) -> None: ...

class FailResponse(_message.Message):
    __slots__ = ["already_failed", "next_run_at", "state"]
    ALREADY_FAILED_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    already_failed: bool
    next_run_at: _timestamp_pb2.Timestamp
    state: _job_pb2.JobState
    def __init__(self, state: _Optional[_Union[_job_pb2.JobState, str]] = ..., next_run_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., already_failed: bool = ...) -> None: ...

class ReserveRequest(_message.Message):
    __slots__ = ["lease_ms", "max_jobs", "queues", "wait_ms", "worker_id"]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_JOBS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    lease_ms: int
    max_jobs: int
    queues: _containers.RepeatedScalarFieldContainer[str]
    wait_ms: int
    worker_id: str
    def __init__(self, queues: _Optional[_Iterable[str]] = ..., worker_id: _Optional[str] = ..., max_jobs: _Optional[int] = ..., lease_ms: _Optional[int] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class ReserveResponse(_message.Message):
    __slots__ = ["jobs"]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[ReservedJob]
    def __init__(self, jobs: _Optional[_Iterable[_Union[ReservedJob, _Mapping]]] = ...) -> None: ...

class ReservedJob(_message.Message):
    __slots__ = ["attempt", "job", "lease_expires_at", "lease_ms", "lease_token"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    job: _job_pb2.Job
    lease_expires_at: _timestamp_pb2.Timestamp
    lease_ms: int
    lease_token: str
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., lease_token: _Optional[str] = ..., attempt: _Optional[int] = ..., lease_expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., lease_ms: _Optional[int] = ...) -> None: ...
