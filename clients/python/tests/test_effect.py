"""Acceptance 6: the seed lab's three scenes with the Python effect helper
(mails sent 1 where the Go lab says 1), and the helper's contract: result
replay, wait and raise, release on failure, lease extension, fail closed on
bad keys or an unreachable server, fail_open that logs and counts."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sys

import pytest

import sepp
from sepp import SeppClient, effect
from sepp_server import CLIENT_DIR, free_port

_spec = importlib.util.spec_from_file_location("invoicelab", CLIENT_DIR / "examples" / "invoicelab.py")
assert _spec and _spec.loader
invoicelab = importlib.util.module_from_spec(_spec)
sys.modules["invoicelab"] = invoicelab
_spec.loader.exec_module(invoicelab)


async def test_lab_crash_before_the_ack(client: SeppClient) -> None:
    lab = invoicelab.Lab(client)
    assert await lab.crash_before_ack(guarded=False) == (2, 2)
    assert await lab.crash_before_ack(guarded=True) == (2, 1)


@pytest.mark.parametrize("mode", ["wait", "raise"])
async def test_lab_two_workers_one_job(client: SeppClient, mode: str) -> None:
    a, b, mails = await invoicelab.Lab(client).two_workers(mode)
    assert mails == 1
    assert a == "em_1"
    assert b == ("em_1" if mode == "wait" else "in progress, requeue")


async def test_lab_what_the_key_is_made_of(client: SeppClient) -> None:
    lab = invoicelab.Lab(client)
    assert await lab.key_made_of(None) == 2  # keyed by job id: two deliveries, two keys
    assert await lab.key_made_of("order-9:invoice") == 1  # a colon is an ordinary character
    assert await lab.key_made_of("order-9.invoice") == 1


async def test_lab_program_prints_the_go_figures(server) -> None:  # type: ignore[no-untyped-def]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(CLIENT_DIR / "examples" / "invoicelab.py"), "--addr", server.url,
        stdout=asyncio.subprocess.PIPE, env={"PYTHONPATH": str(CLIENT_DIR / "src")},
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0
    text = out.decode()
    assert "plain handler                                 deliveries=2  mails sent=2" in text
    assert "handler under an effect key = job id          deliveries=2  mails sent=1" in text
    assert "in_flight='wait'     {'A': 'em_1', 'B': 'em_1'}   mails sent=1" in text
    assert "in_flight='raise'    {'A': 'em_1', 'B': 'in progress, requeue'}   mails sent=1" in text
    assert "key = 'order-9.invoice': the same two jobs    -> mails sent=1" in text


async def test_replay_and_error_release(client: SeppClient, queue: str) -> None:
    runs = 0

    async def charge() -> bytes:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise OSError("card network down")
        return b"ch_1"

    with pytest.raises(OSError):
        await effect.do(client, queue, "order-1.charge", charge)
    first = await effect.do(client, queue, "order-1.charge", charge)  # the claim was released: runs again
    assert (first.value, first.replayed, runs) == (b"ch_1", False, 2)
    again = await effect.do(client, queue, "order-1.charge", charge)
    assert (again.value, again.replayed, runs) == (b"ch_1", True, 2)
    rec = await client.get_effect(queue, "order-1.charge")
    assert rec.found and rec.state is sepp.EffectState.COMPLETED and rec.result == b"ch_1"
    assert not (await client.get_effect(queue, "nope")).found


async def test_do_json_and_sync_fn(client: SeppClient, queue: str) -> None:
    got = await effect.do_json(client, queue, "k", lambda: {"receipt": "em_9", "n": 1})
    assert got == {"receipt": "em_9", "n": 1}
    assert await effect.do_json(client, queue, "k", lambda: {"other": True}) == got
    res = await effect.do(client, queue, "s", lambda: "plain")
    assert res.value == b"plain"


class _Watched(SeppClient):
    """A client that tells when the effect helper claimed a key and when it
    extended a claim, so a test waits on those events instead of on time
    (every call still goes to the real server)."""

    claims: "list[sepp.EffectClaim]"
    extensions: "asyncio.Queue[object]"

    async def claim_effect(self, *args, **kwargs):  # type: ignore[no-untyped-def,override]
        claim = await super().claim_effect(*args, **kwargs)
        self.claims.append(claim)
        return claim

    async def extend_effect_lease(self, *args, **kwargs):  # type: ignore[no-untyped-def,override]
        until = await super().extend_effect_lease(*args, **kwargs)
        self.extensions.put_nowait(until)
        return until


async def test_lease_is_extended_while_fn_runs(server, queue: str) -> None:  # type: ignore[no-untyped-def]
    started, finish = asyncio.Event(), asyncio.Event()

    async def slow() -> bytes:
        started.set()
        await finish.wait()
        return b"done"

    async with _Watched.connect(server.url) as c:
        assert isinstance(c, _Watched)
        c.claims, c.extensions = [], asyncio.Queue()
        task = asyncio.create_task(effect.do(c, queue, "slow", slow, lease=1.0))
        await started.wait()
        first_end = c.claims[0].lease_expires_at
        assert c.claims[0].state is sepp.EffectState.ACQUIRED and first_end is not None
        # The helper extends the claim while fn runs: each extension moves
        # the lease's end past the one before, the first past the claim's.
        ends = [await asyncio.wait_for(c.extensions.get(), 10) for _ in range(2)]
        assert first_end < ends[0] < ends[1], (first_end, ends)  # type: ignore[operator]
        # The server holds the claim until the last extension's end, not the
        # first lease's: another caller finds it in progress.
        holder = await c.claim_effect(queue, "slow")
        assert holder.state is sepp.EffectState.IN_PROGRESS
        assert holder.lease_expires_at is not None and holder.lease_expires_at >= ends[1]
        with pytest.raises(sepp.EffectInProgressError):
            await effect.do(c, queue, "slow", slow, mode="raise")
        finish.set()
        assert (await task).value == b"done"
        assert (await effect.do(c, queue, "slow", slow, mode="raise")).replayed


@pytest.mark.parametrize("scope,key", [("mail", ""), ("", "k"), ("mail", "k" * 257), ("mail", "é" * 129)])
async def test_bad_keys_fail_closed(client: SeppClient, scope: str, key: str) -> None:
    ran = False

    def fn() -> bytes:
        nonlocal ran
        ran = True
        return b""

    with pytest.raises(sepp.InvalidEffectKeyError):
        await effect.do(client, scope, key, fn, fail_open=True)
    assert not ran


async def test_any_character_is_a_key(client: SeppClient, queue: str) -> None:
    for key in ("order-9:invoice", "a/b c", "\x00nul", "🧾" * 64):  # 64 emoji = 256 bytes
        assert not (await effect.do(client, queue, key, lambda: b"x")).replayed


async def test_unreachable_server_fails_closed_unless_fail_open(caplog: pytest.LogCaptureFixture) -> None:
    ran = 0

    def fn() -> bytes:
        nonlocal ran
        ran += 1
        return b"sent anyway"

    async with SeppClient.connect(f"http://127.0.0.1:{free_port()}", check=False) as c:
        with pytest.raises(sepp.UnavailableError, match="not run"):
            await effect.do(c, "mail.invoice", "order-9.invoice", fn)
        assert ran == 0
        before = effect.unprotected_runs("mail.invoice")
        with caplog.at_level(logging.WARNING, logger="sepp.effect"):
            res = await effect.do(c, "mail.invoice", "order-9.invoice", fn, fail_open=True)
        assert res.unprotected and res.value == b"sent anyway" and ran == 1
        assert effect.unprotected_runs("mail.invoice") == before + 1
        assert any("UNPROTECTED" in r.getMessage() for r in caplog.records)
