"""Effect keys: make a handler's external effect (a mail, a charge) happen once
under at-least-once delivery. One call guards one effect::

    from sepp import effect

    res = await effect.do(client, "mail.invoice", "order-9.invoice",
                          lambda: mailer.send_invoice(order), mode="wait")
    receipt = res.value          # bytes; res.replayed is True on a repeat

The first call to claim the key runs ``fn`` and stores its result; a later
call with the same key, from any delivery on any worker, gets that result
back without running ``fn``. While one holder runs ``fn``, others wait for
its result (``mode="wait"``) or get :class:`~sepp.EffectInProgressError`
(``mode="raise"``), which the worker runtime turns into a retry after a
short delay.

Name the effect, not the delivery: ``"order-9.invoice"`` is the invoice of
order 9 however many jobs ask for it; a job id is one delivery's identity.
Any string of 1 to 256 bytes of UTF-8 is a key; no character is reserved (a
colon is an ordinary character).

It fails closed: an invalid key, or a server that cannot be reached, is an
error and ``fn`` does not run. ``fail_open=True`` runs ``fn`` unprotected
when the server cannot be reached instead, and logs and counts every such run
(:func:`unprotected_runs`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Awaitable, Callable, Dict, Literal, Optional, TypeVar, Union

from . import _wire
from .client import SeppClient
from .errors import EffectInProgressError, InvalidEffectKeyError, LeaseLostError, SeppError, UnavailableError
from .types import EffectState

__all__ = ["do", "do_json", "EffectResult", "Mode", "unprotected_runs", "check_name"]

_log = logging.getLogger("sepp.effect")

#: What a call does while another holder runs the effect: ``"wait"`` for
#: its result (or for the key, when it releases it or its lease ends), or
#: ``"raise"`` :class:`~sepp.EffectInProgressError` at once.
Mode = Literal["wait", "raise"]

Seconds = Union[float, int, timedelta]
EffectFn = Callable[[], Union[Awaitable[Union[bytes, str, None]], bytes, str, None]]
T = TypeVar("T")

_unprotected: Dict[str, int] = {}


def unprotected_runs(scope: Optional[str] = None) -> int:
    """How many effects ran unprotected (``fail_open``) in this process, in
    ``scope`` or in all scopes."""
    if scope is None:
        return sum(_unprotected.values())
    return _unprotected.get(scope, 0)


@dataclass(frozen=True)
class EffectResult:
    """How :func:`do` got its result.

    Attributes:
        value: the effect's result (what ``fn`` returned, as bytes).
        replayed: True when ``fn`` did not run here: the result is the one
            stored by an earlier run.
        unprotected: True when ``fn`` ran without a claim (``fail_open``).
    """

    value: bytes
    replayed: bool = False
    unprotected: bool = False


def check_name(field: str, value: Any) -> None:
    """Checks an effect scope or key: a str of 1 to 256 bytes of UTF-8.

    Raises:
        InvalidEffectKeyError: with a message saying what is wrong; the
            effect does not run.
    """
    if not isinstance(value, str):
        raise InvalidEffectKeyError(
            f"effect {field} must be a str, not {type(value).__name__}; the effect did not run",
            metadata={"field": field},
        )
    if value == "":
        raise InvalidEffectKeyError(f"effect {field} is empty; the effect did not run", metadata={"field": field})
    try:
        n = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidEffectKeyError(
            f"effect {field} is not valid UTF-8; the effect did not run", metadata={"field": field}
        ) from None
    if n > 256:
        raise InvalidEffectKeyError(
            f"effect {field} is {n} bytes, the limit is 256; the effect did not run", metadata={"field": field}
        )


async def _call(fn: EffectFn) -> bytes:
    """Calls fn (async or not) and returns its result as bytes."""
    out = fn()
    if inspect.isawaitable(out):
        out = await out
    if out is None:
        return b""
    if isinstance(out, str):
        return out.encode("utf-8")
    if isinstance(out, (bytes, bytearray, memoryview)):
        return bytes(out)
    raise TypeError(f"an effect must return bytes, str or None, not {type(out).__name__} (use do_json)")


async def do(
    client: SeppClient,
    scope: str,
    key: str,
    fn: EffectFn,
    *,
    mode: Mode = "wait",
    ttl: Seconds = 24 * 3600,
    lease: Seconds = 30.0,
    wait_timeout: Seconds = 30.0,
    fail_open: bool = False,
    logger: Optional[logging.Logger] = None,
) -> EffectResult:
    """Runs ``fn`` at most once for ``(scope, key)`` within the record's TTL
    and returns its result; a repeat returns the stored result without
    running ``fn``.

    Args:
        client: the client.
        scope: the kind of effect, e.g. ``"mail.invoice"``.
        key: the effect's identity, e.g. ``"order-9.invoice"``.
        fn: the effect: an async function (or a plain one) of no arguments
            returning bytes, str or None.
        mode: ``"wait"`` (default) or ``"raise"``, for when another holder is
            running the effect.
        ttl: how long the completed record lives, in seconds: size it to
            outlast the longest redelivery of any job that may carry this
            effect. Default 24 h.
        lease: how long a claim holds without an extension; ``do`` extends it
            every third of it while ``fn`` runs. Default 30 s.
        wait_timeout: bounds one wait for a holder in wait mode; ``do``
            claims again after it. Default 30 s.
        fail_open: run ``fn`` unprotected when the server cannot be reached,
            logging and counting the run. Default False: fail closed.
        logger: receives the fail_open warnings. Default ``sepp.effect``.

    Returns:
        An :class:`EffectResult`.

    Raises:
        InvalidEffectKeyError: the scope or key is invalid; ``fn`` did not run.
        EffectInProgressError: another holder runs the effect (raise mode).
        UnavailableError: the server cannot be reached; ``fn`` did not run
            (unless ``fail_open``).
        Exception: what ``fn`` raised; the claim was released, so a retry
            can run it.
    """
    if mode not in ("wait", "raise"):
        raise ValueError(f'mode must be "wait" or "raise", not {mode!r}')
    check_name("scope", scope)
    check_name("key", key)
    log = logger or _log
    ttl_s, lease_s, wait_s = _wire.seconds(ttl), _wire.seconds(lease) or 30.0, _wire.seconds(wait_timeout) or 30.0
    while True:
        try:
            claim = await client.claim_effect(
                scope, key, ttl=ttl_s, lease=lease_s, wait=wait_s if mode == "wait" else None
            )
        except UnavailableError as err:
            if not fail_open:
                raise UnavailableError(f"effect {scope}/{key} not run: {err.message}") from err
            log.warning(
                "effect server unreachable: running the effect UNPROTECTED (fail_open): scope=%s key=%s err=%s",
                scope, key, err,
            )
            _unprotected[scope] = _unprotected.get(scope, 0) + 1
            return EffectResult(value=await _call(fn), unprotected=True)
        if claim.state is EffectState.COMPLETED:
            return EffectResult(value=claim.result, replayed=True)
        if claim.state is EffectState.IN_PROGRESS:
            if mode == "raise":
                until = claim.lease_expires_at.isoformat() if claim.lease_expires_at else "its lease ends"
                raise EffectInProgressError(
                    f"effect {scope}/{key} is being run by another holder until {until}: retry later",
                    metadata={"scope": scope, "key": key},
                )
            continue  # the wait ended with the holder still running: claim again
        if claim.state is not EffectState.ACQUIRED:
            raise SeppError(f"effect {scope}/{key}: the server answered the claim with {claim.state.value}",
                            code="internal", reason="INTERNAL")
        return await _run(client, claim.token, lease_s, fn)


async def _run(client: SeppClient, token: str, lease: float, fn: EffectFn) -> EffectResult:
    """Runs fn under an acquired claim, extending its lease, then completes
    or releases it."""

    async def extend() -> None:
        """Extends the claim every third of its lease until cancelled."""
        while True:
            await asyncio.sleep(max(lease / 3.0, 0.01))
            try:
                await client.extend_effect_lease(token, lease)
            except LeaseLostError:
                return  # fn will find out when it completes
            except SeppError:
                pass  # try again at the next tick

    extender = asyncio.get_running_loop().create_task(extend())
    try:
        value = await _call(fn)
    except BaseException as exc:
        extender.cancel()
        await asyncio.gather(extender, return_exceptions=True)
        try:
            await asyncio.shield(client.release_effect(token))
        except LeaseLostError:
            pass
        except SeppError as rerr:
            exc.add_note(f"releasing the effect claim failed too: {rerr}")
        raise
    extender.cancel()
    await asyncio.gather(extender, return_exceptions=True)
    try:
        value = await client.complete_effect(token, value)
    except SeppError as err:
        # The effect ran but its record is not stored (the lease ended, or
        # the server stayed gone through the client's resends): a later
        # claim may run it again.
        raise type(err)(
            f"effect ran, but its result could not be recorded: {err.message}",
            code=err.code, reason=err.reason, metadata=err.metadata,
        ) from err
    return EffectResult(value=value)


async def do_json(
    client: SeppClient,
    scope: str,
    key: str,
    fn: Callable[[], Union[Awaitable[T], T]],
    **options: Any,
) -> T:
    """:func:`do` for a result of any JSON-serialisable type, stored and
    replayed as JSON. Takes the same keyword options as :func:`do`."""

    async def as_json() -> bytes:
        """fn's value, as JSON."""
        out = fn()
        if inspect.isawaitable(out):
            out = await out
        return json.dumps(out, separators=(",", ":")).encode("utf-8")

    res = await do(client, scope, key, as_json, **options)
    return json.loads(res.value) if res.value else None  # type: ignore[no-any-return]
