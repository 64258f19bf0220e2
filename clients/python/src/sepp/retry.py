"""The retry policy every Sepp client shares (``clients/retry-policy.json``,
which this client's tests check :func:`delay` against).

A call whose outcome is unknown (reason ``UNAVAILABLE``: the server could
not be reached, did not answer in time, or was shutting down) is resent when
a resend is harmless: a keyed enqueue (the resend is a hit if the first try
was written), ``Complete``, ``CompleteBatch``, ``Fail`` and
``CompleteEffect`` (the server answers a repeat of a committed call with
success). An unkeyed enqueue is never resent: a resend could make a second
job. Resend number ``retry + 1`` waits :func:`delay` of ``retry`` and a
uniform draw in [0, 1): full jitter under a ceiling that doubles from
``BASE_MS`` to ``CAP_MS``, so clients that lost the server together do not
come back together.
"""

from __future__ import annotations

import random as _random
from dataclasses import dataclass

__all__ = ["RETRIES", "BASE_MS", "CAP_MS", "RETRY_ON", "delay", "jittered_delay", "RetryPolicy"]

#: How many resends follow the first try by default.
RETRIES = 5
#: The ceiling of the first resend's wait, in milliseconds.
BASE_MS = 50
#: The most any resend waits, in milliseconds.
CAP_MS = 2000
#: The reasons whose calls are resent.
RETRY_ON = ("UNAVAILABLE",)


def delay(retry: int, random: float) -> float:
    """The wait, in seconds, before the resend that follows ``retry``
    earlier resends (0 for the first), for ``random`` uniform in [0, 1):
    ``random * min(CAP_MS, BASE_MS * 2**retry) / 1000``."""
    # 50 ms << 16 is far past the cap: the guard keeps a large retry count
    # from making a huge integer.
    ceiling_ms = CAP_MS if retry >= 16 else min(CAP_MS, BASE_MS << max(retry, 0))
    return random * ceiling_ms / 1000


def jittered_delay(retry: int) -> float:
    """:func:`delay` with a random draw."""
    return delay(retry, _random.random())


@dataclass(frozen=True)
class RetryPolicy:
    """How many times a call whose outcome is unknown is resent (see the
    module's description for which calls are). The waits between resends are
    the shared policy's, :func:`delay`; only their number is the program's.

    ``RetryPolicy()`` resends up to 5 times, as every Sepp client does by
    default; ``RetryPolicy(max_retries=0)`` turns resends off.
    """

    max_retries: int = RETRIES
