"""The client's exception classes are the reasons of the proto enum
sepp.v1.Reason, the one list of reasons: one class for every value a client
call can get, and none for a reason the enum lacks (needs no server)."""

from __future__ import annotations

import sepp
from sepp import errors
from sepp.v1 import reason_pb2

#: Not reasons a client call gets: the zero value (an error that carried no
#: reason), and the two only webhook endpoints answer with.
NOT_FOR_CLIENTS = {"REASON_UNSPECIFIED", "SIGNATURE_INVALID", "METHOD_NOT_ALLOWED"}


def test_one_class_per_reason_of_the_enum() -> None:
    enum = set(reason_pb2.Reason.keys()) - NOT_FOR_CLIENTS
    classes = set(errors._BY_REASON)
    assert enum - classes == set(), "reasons of sepp.v1.Reason with no exception class"
    assert classes - set(reason_pb2.Reason.keys()) == set(), "exception classes of reasons sepp.v1.Reason lacks"
    assert classes & NOT_FOR_CLIENTS == set()


def test_each_class_is_its_reason_and_exported() -> None:
    for reason, cls in errors._BY_REASON.items():
        assert cls.REASON == reason
        assert issubclass(cls, sepp.SeppError)
        assert getattr(sepp, cls.__name__) is cls, f"{cls.__name__} is not exported by the sepp package"
        assert cls.__name__ in errors.__all__
        err = errors.error_for(cls.CODE, reason, "m")
        assert type(err) is cls and err.reason == reason


def test_subclasses_keep_their_parents_reason() -> None:
    # Not reasons of their own: a NotDeadError is a JobNotFoundError, an
    # InvalidEffectKeyError an InvalidFieldError.
    assert sepp.NotDeadError(["x"], 0).reason == "JOB_NOT_FOUND"
    assert sepp.InvalidEffectKeyError("m").reason == "INVALID_FIELD"
    assert sepp.NotDeadError not in errors._BY_REASON.values()
    assert sepp.InvalidEffectKeyError not in errors._BY_REASON.values()
