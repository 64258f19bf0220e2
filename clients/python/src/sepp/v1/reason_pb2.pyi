from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

BACKUP_UNSUPPORTED: Reason
BATCH_TOO_LARGE: Reason
DEDUP_RULE_VIOLATED: Reason
DESCRIPTOR: _descriptor.FileDescriptor
DUPLICATE_JOB: Reason
EFFECT_IN_PROGRESS: Reason
IDEMPOTENCY_KEY_CONFLICT: Reason
IDEMPOTENCY_KEY_EMPTY: Reason
IDEMPOTENCY_KEY_REQUIRED: Reason
IDEMPOTENCY_KEY_TOO_LONG: Reason
INTERNAL: Reason
INVALID_FIELD: Reason
JOB_NOT_FOUND: Reason
LEASE_LOST: Reason
LIMIT_EXCEEDED: Reason
METHOD_NOT_ALLOWED: Reason
PAYLOAD_TOO_LARGE: Reason
PERMISSION_DENIED: Reason
REASON_UNSPECIFIED: Reason
SIGNATURE_INVALID: Reason
UNAUTHENTICATED: Reason
UNAVAILABLE: Reason
UNKNOWN_JOB_TYPE: Reason
UNKNOWN_QUEUE: Reason

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
