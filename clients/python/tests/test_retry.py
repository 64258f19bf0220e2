"""The retry policy is the one every Sepp client shares:
clients/retry-policy.json, whose cases delay() must give (needs no server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

import sepp
from sepp import retry

POLICY_PATH = Path(__file__).resolve().parent.parent.parent / "retry-policy.json"
POLICY: Dict[str, Any] = json.loads(POLICY_PATH.read_text(encoding="utf-8"))


def test_the_constants_are_the_files() -> None:
    assert (retry.RETRIES, retry.BASE_MS, retry.CAP_MS) == (POLICY["retries"], POLICY["base_ms"], POLICY["cap_ms"])
    assert sepp.RetryPolicy().max_retries == POLICY["retries"]
    assert list(retry.RETRY_ON) == POLICY["retry_on"] == [sepp.UnavailableError.REASON]
    assert POLICY["cases"], "retry-policy.json has no cases"


@pytest.mark.parametrize("case", POLICY["cases"], ids=lambda c: f"retry={c['retry']},random={c['random']}")
def test_delay(case: Dict[str, Any]) -> None:
    got_ms = retry.delay(case["retry"], case["random"]) * 1000
    assert got_ms == pytest.approx(case["delay_ms"], abs=1e-6)


def test_jitter_stays_under_the_ceiling() -> None:
    for r in range(12):
        ceiling = min(retry.CAP_MS, retry.BASE_MS * 2**r) / 1000
        for _ in range(50):
            assert 0 <= retry.jittered_delay(r) < ceiling
