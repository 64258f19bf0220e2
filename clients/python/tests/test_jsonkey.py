"""derive_key against the Go server's own test vectors
(internal/jsonkey/testdata/vectors.json, written by its TestVectors): the
same key byte for byte, or a DeriveKeyError naming the same pointer with the
same message. Needs no server."""

from __future__ import annotations

import json
import os

import pytest

import sepp
from sepp import DeriveKeyError, InvalidFieldError, SeppError, derive_key

_REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_VECTORS_PATH = os.path.join(_REPO, "internal", "jsonkey", "testdata", "vectors.json")

with open(_VECTORS_PATH, encoding="utf-8") as f:
    VECTORS = json.load(f)


def _inputs(v):
    if "payload_hex" in v:
        return [bytes.fromhex(v["payload_hex"])]
    text = v.get("payload", "")
    return [text, text.encode("utf-8")]


def test_there_are_vectors():
    assert len(VECTORS) > 100


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_go_vector(v):
    for payload in _inputs(v):
        if "key" in v:
            assert derive_key(payload, *v["pointers"]) == v["key"]
            continue
        with pytest.raises(DeriveKeyError) as info:
            derive_key(payload, *v["pointers"])
        err = info.value
        assert err.pointer == v["error"]["pointer"]
        assert err.metadata["pointer"] == v["error"]["pointer"]
        assert err.message == v["error"]["message"]
        assert err.reason == "INVALID_FIELD"


def test_readme_example():
    assert derive_key(b'{"amount": 100, "account": "acc-123"}', "/account", "/amount") == '["acc-123",100]'
    assert derive_key('{"account":"acc-123","amount":1.00e2,"note":"retry"}', "/account", "/amount") == '["acc-123",100]'
    assert sepp.derive_key is derive_key


def test_error_classes():
    with pytest.raises(ValueError) as info:
        derive_key(b'{"account":"acc-123"}', "/account", "/amount")
    err = info.value
    assert isinstance(err, DeriveKeyError)
    assert isinstance(err, InvalidFieldError)
    assert isinstance(err, SeppError)
    assert err.pointer == "/amount"
    assert '"/amount"' in str(err)


def test_lone_surrogate_in_str_payload():
    with pytest.raises(DeriveKeyError) as info:
        derive_key('{"a":"\ud800"}', "/a")
    assert info.value.pointer == ""
    assert "lone surrogate" in info.value.message


@pytest.mark.parametrize(
    "literal,want",
    [
        ("1e21", "1e+21"),
        ("1e20", "100000000000000000000"),
        ("1e-7", "1e-7"),
        ("1e-6", "0.000001"),
        ("1.5e-7", "1.5e-7"),
        ("100.0", "100"),
        ("-0.0", "0"),
        ("-0", "0"),
        ("123456789012345680000", "123456789012345680000"),
        ("0.1", "0.1"),
        ("-1.7976931348623157e308", "-1.7976931348623157e+308"),
        ("5e-324", "5e-324"),
    ],
)
def test_numbers(literal, want):
    assert derive_key('{"n":%s}' % literal, "/n") == "[%s]" % want


def test_deep_nesting_as_the_server():
    # The server takes 10000 levels (the object counts as one) and no more.
    ok = '{"a":' + "[" * 9999 + "]" * 9999 + "}"
    assert derive_key(ok, "/a") == "[" + "[" * 9999 + "]" * 9999 + "]"
    with pytest.raises(DeriveKeyError) as info:
        derive_key('{"a":' + "[" * 10000 + "]" * 10000 + "}", "/a")
    assert "nested more than 10000 deep" in info.value.message
    assert info.value.pointer == ""
