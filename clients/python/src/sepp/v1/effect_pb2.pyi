from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

CLAIM_OUTCOME_ACQUIRED: ClaimOutcome
CLAIM_OUTCOME_COMPLETED: ClaimOutcome
CLAIM_OUTCOME_IN_PROGRESS: ClaimOutcome
CLAIM_OUTCOME_UNSPECIFIED: ClaimOutcome
DESCRIPTOR: _descriptor.FileDescriptor

class ClaimEffectRequest(_message.Message):
    __slots__ = ["key", "lease_ms", "scope", "ttl_ms", "wait_ms"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    key: str
    lease_ms: int
    scope: str
    ttl_ms: int
    wait_ms: int
    def __init__(self, scope: _Optional[str] = ..., key: _Optional[str] = ..., ttl_ms: _Optional[int] = ..., lease_ms: _Optional[int] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class ClaimEffectResponse(_message.Message):
    __slots__ = ["lease_expires_at", "outcome", "result", "token"]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    lease_expires_at: _timestamp_pb2.Timestamp
    outcome: ClaimOutcome
    result: bytes
    token: str
    def __init__(self, outcome: _Optional[_Union[ClaimOutcome, str]] = ..., token: _Optional[str] = ..., result: _Optional[bytes] = ..., lease_expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CompleteEffectRequest(_message.Message):
    __slots__ = ["result", "token"]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    result: bytes
    token: str
    def __init__(self, token: _Optional[str] = ..., result: _Optional[bytes] = ...) -> None: ...

class CompleteEffectResponse(_message.Message):
    __slots__ = ["already_completed", "completed_at", "result"]
    ALREADY_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    already_completed: bool
    completed_at: _timestamp_pb2.Timestamp
    result: bytes
    def __init__(self, result: _Optional[bytes] = ..., completed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., already_completed: bool = ...) -> None: ...

class ExtendEffectLeaseRequest(_message.Message):
    __slots__ = ["lease_ms", "token"]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    lease_ms: int
    token: str
    def __init__(self, token: _Optional[str] = ..., lease_ms: _Optional[int] = ...) -> None: ...

class ExtendEffectLeaseResponse(_message.Message):
    __slots__ = ["lease_expires_at"]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    lease_expires_at: _timestamp_pb2.Timestamp
    def __init__(self, lease_expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetEffectRequest(_message.Message):
    __slots__ = ["key", "scope"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    key: str
    scope: str
    def __init__(self, scope: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class GetEffectResponse(_message.Message):
    __slots__ = ["completed_at", "expires_at", "found", "result", "state"]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    completed_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    found: bool
    result: bytes
    state: ClaimOutcome
    def __init__(self, found: bool = ..., state: _Optional[_Union[ClaimOutcome, str]] = ..., result: _Optional[bytes] = ..., completed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReleaseEffectRequest(_message.Message):
    __slots__ = ["token"]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class ReleaseEffectResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ClaimOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
