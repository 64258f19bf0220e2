from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sepp.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BackupFile(_message.Message):
    __slots__ = ["path", "sha256", "size"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    path: str
    sha256: str
    size: int
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class BackupManifest(_message.Message):
    __slots__ = ["acked_commits", "acked_jobs", "created_at", "files", "format", "queues", "schema_version", "server_version"]
    ACKED_COMMITS_FIELD_NUMBER: _ClassVar[int]
    ACKED_JOBS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    acked_commits: int
    acked_jobs: int
    created_at: _timestamp_pb2.Timestamp
    files: _containers.RepeatedCompositeFieldContainer[BackupFile]
    format: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    schema_version: int
    server_version: str
    def __init__(self, format: _Optional[str] = ..., server_version: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., schema_version: _Optional[int] = ..., acked_commits: _Optional[int] = ..., acked_jobs: _Optional[int] = ..., queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ..., files: _Optional[_Iterable[_Union[BackupFile, _Mapping]]] = ...) -> None: ...

class CreateBackupRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CreateBackupResponse(_message.Message):
    __slots__ = ["backup_id", "manifest"]
    BACKUP_ID_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    backup_id: str
    manifest: BackupManifest
    def __init__(self, backup_id: _Optional[str] = ..., manifest: _Optional[_Union[BackupManifest, _Mapping]] = ...) -> None: ...

class DeleteBackupRequest(_message.Message):
    __slots__ = ["backup_id"]
    BACKUP_ID_FIELD_NUMBER: _ClassVar[int]
    backup_id: str
    def __init__(self, backup_id: _Optional[str] = ...) -> None: ...

class DeleteBackupResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "queue", "state"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    queue: str
    state: _job_pb2.JobState
    def __init__(self, queue: _Optional[str] = ..., state: _Optional[_Union[_job_pb2.JobState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ["jobs", "next_page_token"]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListOutboxesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListOutboxesResponse(_message.Message):
    __slots__ = ["outboxes"]
    OUTBOXES_FIELD_NUMBER: _ClassVar[int]
    outboxes: _containers.RepeatedCompositeFieldContainer[OutboxInfo]
    def __init__(self, outboxes: _Optional[_Iterable[_Union[OutboxInfo, _Mapping]]] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListQueuesResponse(_message.Message):
    __slots__ = ["queues"]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ["schedules"]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[ScheduleInfo]
    def __init__(self, schedules: _Optional[_Iterable[_Union[ScheduleInfo, _Mapping]]] = ...) -> None: ...

class OutboxInfo(_message.Message):
    __slots__ = ["checked_at", "dead", "dialect", "lag_ms", "last_error", "name", "relayed", "table"]
    CHECKED_AT_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    DIALECT_FIELD_NUMBER: _ClassVar[int]
    LAG_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RELAYED_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    checked_at: _timestamp_pb2.Timestamp
    dead: int
    dialect: str
    lag_ms: int
    last_error: str
    name: str
    relayed: int
    table: str
    def __init__(self, name: _Optional[str] = ..., dialect: _Optional[str] = ..., table: _Optional[str] = ..., lag_ms: _Optional[int] = ..., relayed: _Optional[int] = ..., dead: _Optional[int] = ..., checked_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ...) -> None: ...

class PauseQueueRequest(_message.Message):
    __slots__ = ["create", "queue"]
    CREATE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    create: bool
    queue: str
    def __init__(self, queue: _Optional[str] = ..., create: bool = ...) -> None: ...

class PauseQueueResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class PurgeDeadJobsRequest(_message.Message):
    __slots__ = ["all", "job_ids", "queue"]
    ALL_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    all: bool
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    queue: str
    def __init__(self, queue: _Optional[str] = ..., job_ids: _Optional[_Iterable[str]] = ..., all: bool = ...) -> None: ...

class PurgeDeadJobsResponse(_message.Message):
    __slots__ = ["missing_job_ids", "purged"]
    MISSING_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    PURGED_FIELD_NUMBER: _ClassVar[int]
    missing_job_ids: _containers.RepeatedScalarFieldContainer[str]
    purged: int
    def __init__(self, purged: _Optional[int] = ..., missing_job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ["available", "cancelled", "completed", "dead", "dedup_records", "held_concurrency", "held_follow_up", "held_rate", "name", "paused", "reserved", "scheduled"]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    DEDUP_RECORDS_FIELD_NUMBER: _ClassVar[int]
    HELD_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    HELD_FOLLOW_UP_FIELD_NUMBER: _ClassVar[int]
    HELD_RATE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    RESERVED_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    available: int
    cancelled: int
    completed: int
    dead: int
    dedup_records: int
    held_concurrency: int
    held_follow_up: int
    held_rate: int
    name: str
    paused: bool
    reserved: int
    scheduled: int
    def __init__(self, name: _Optional[str] = ..., scheduled: _Optional[int] = ..., available: _Optional[int] = ..., reserved: _Optional[int] = ..., completed: _Optional[int] = ..., dead: _Optional[int] = ..., cancelled: _Optional[int] = ..., dedup_records: _Optional[int] = ..., paused: bool = ..., held_follow_up: _Optional[int] = ..., held_concurrency: _Optional[int] = ..., held_rate: _Optional[int] = ...) -> None: ...

class ReadBackupFileRequest(_message.Message):
    __slots__ = ["backup_id", "max_bytes", "offset", "path"]
    BACKUP_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    backup_id: str
    max_bytes: int
    offset: int
    path: str
    def __init__(self, backup_id: _Optional[str] = ..., path: _Optional[str] = ..., offset: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class ReadBackupFileResponse(_message.Message):
    __slots__ = ["data", "eof"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    eof: bool
    def __init__(self, data: _Optional[bytes] = ..., eof: bool = ...) -> None: ...

class RequeueDeadJobsRequest(_message.Message):
    __slots__ = ["all", "job_ids", "queue"]
    ALL_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    all: bool
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    queue: str
    def __init__(self, queue: _Optional[str] = ..., job_ids: _Optional[_Iterable[str]] = ..., all: bool = ...) -> None: ...

class RequeueDeadJobsResponse(_message.Message):
    __slots__ = ["missing_job_ids", "requeued"]
    MISSING_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    REQUEUED_FIELD_NUMBER: _ClassVar[int]
    missing_job_ids: _containers.RepeatedScalarFieldContainer[str]
    requeued: int
    def __init__(self, requeued: _Optional[int] = ..., missing_job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ResumeQueueRequest(_message.Message):
    __slots__ = ["create", "queue"]
    CREATE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    create: bool
    queue: str
    def __init__(self, queue: _Optional[str] = ..., create: bool = ...) -> None: ...

class ResumeQueueResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ScheduleInfo(_message.Message):
    __slots__ = ["catch_up", "cron", "job_type", "last_error", "last_job_id", "last_tick", "name", "next_tick", "queue", "timezone"]
    CATCH_UP_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_TICK_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_TICK_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    catch_up: str
    cron: str
    job_type: str
    last_error: str
    last_job_id: str
    last_tick: _timestamp_pb2.Timestamp
    name: str
    next_tick: _timestamp_pb2.Timestamp
    queue: str
    timezone: str
    def __init__(self, name: _Optional[str] = ..., cron: _Optional[str] = ..., timezone: _Optional[str] = ..., queue: _Optional[str] = ..., job_type: _Optional[str] = ..., catch_up: _Optional[str] = ..., last_tick: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., next_tick: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_job_id: _Optional[str] = ..., last_error: _Optional[str] = ...) -> None: ...
