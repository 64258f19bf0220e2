"""The lab of the post on handler-side idempotency (seed 001), with the Python
effect helper, against a real Sepp server. It prints the post's three tables
with Sepp's figures, as the Go lab (examples/invoicelab/main.go) does.

    PYTHONPATH=src /usr/bin/python3 examples/invoicelab.py --addr http://127.0.0.1:50051

Every scene uses the real API: jobs are enqueued and reserved under leases,
a "crash" is a worker that stops before it acknowledges, and the mailer is a
counter that returns receipts em_1, em_2, ...
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Awaitable, Callable, Optional, Tuple

from sepp import EffectInProgressError, EnqueueRequest, Reservation, SeppClient, effect

#: The job lease of the lab's queues: short, so redeliveries come fast.
LEASE = 0.3


class Mailer:
    """Counts mails and returns receipts."""

    def __init__(self) -> None:
        self.sent = 0

    def send(self, took: float = 0.0) -> Callable[[], Awaitable[bytes]]:
        """An effect that sends one mail, taking ``took`` seconds."""

        async def send_invoice() -> bytes:
            self.sent += 1
            n = self.sent
            await asyncio.sleep(took)
            return f"em_{n}".encode()

        return send_invoice


class Lab:
    """The three scenes, each on a queue and an effect scope of its own."""

    def __init__(self, client: SeppClient) -> None:
        self.c = client
        self.run = str(time.time_ns())
        self.n = 0

    def fresh(self) -> Tuple[str, str]:
        """A queue and an effect scope for one scene."""
        self.n += 1
        return f"lab-{self.run}-{self.n}", f"mail.invoice.{self.run}.{self.n}"

    async def reserve(self, queue: str) -> Reservation:
        got = await self.c.reserve(queue, lease=LEASE, wait=10)
        if len(got) != 1:
            raise RuntimeError(f"reserve from {queue}: got {len(got)} jobs")
        return got[0]

    async def crash_before_ack(self, guarded: bool) -> Tuple[int, int]:
        """The worker sends the mail and dies before Complete; the lease ends
        and the job is delivered again. Returns (deliveries, mails sent)."""
        queue, scope = self.fresh()
        await self.c.enqueue(EnqueueRequest(queue, "invoice", payload=b"order-9"))
        m = Mailer()

        async def handle(r: Reservation) -> bytes:
            if not guarded:
                return await m.send()()
            res = await effect.do(self.c, scope, r.job.job_id, m.send(), ttl=3600)
            return res.value

        await handle(await self.reserve(queue))  # then the worker dies: no complete
        second = await self.reserve(queue)
        receipt = await handle(second)
        await self.c.complete(second.job.job_id, second.lease_token, receipt)
        return second.attempt, m.sent

    async def two_workers(self, mode: effect.Mode) -> Tuple[str, str, int]:
        """Worker A is slow, the job's lease ends, worker B gets the same job
        while A still runs the effect. Returns (A's answer, B's, mails)."""
        queue, scope = self.fresh()
        await self.c.enqueue(EnqueueRequest(queue, "invoice"))
        m = Mailer()
        await self.reserve(queue)  # A's delivery
        a_task = asyncio.create_task(
            # A's mail takes five job leases: B's delivery comes while it runs.
            effect.do(self.c, scope, "order-9.invoice", m.send(5 * LEASE), mode=mode, ttl=3600)
        )
        b_job = await self.reserve(queue)  # after A's job lease ended
        try:
            res = await effect.do(self.c, scope, "order-9.invoice", m.send(), mode=mode, ttl=3600)
        except EffectInProgressError as err:
            b = "in progress, requeue"
            await self.c.fail(b_job.job.job_id, b_job.lease_token, str(err))
            a = (await a_task).value.decode()
            # The next delivery replays A's receipt.
            nxt = await self.reserve(queue)
            again = await effect.do(self.c, scope, "order-9.invoice", m.send(), mode=mode, ttl=3600)
            if again.value.decode() != a or not again.replayed:
                raise RuntimeError(f"the delivery after the requeue got {again}")
            await self.c.complete(nxt.job.job_id, nxt.lease_token, again.value)
            return a, b, m.sent
        b = res.value.decode()
        a = (await a_task).value.decode()
        return a, b, m.sent

    async def key_made_of(self, key: Optional[str]) -> int:
        """Two jobs for order 9, handled under ``key`` (or, when None, under
        each job's id). Returns the mails sent."""
        queue, scope = self.fresh()
        m = Mailer()
        for i in range(2):
            await self.c.enqueue(EnqueueRequest(queue, "invoice", payload=f"order-9 #{i}".encode()))
        for _ in range(2):
            r = await self.reserve(queue)
            res = await effect.do(self.c, scope, key or r.job.job_id, m.send(), ttl=3600)
            await self.c.complete(r.job.job_id, r.lease_token, res.value)
        return m.sent


async def main(addr: str) -> None:
    async with SeppClient.connect(addr) as client:
        lab = Lab(client)
        print("The crash before the ack")
        print()
        for guarded in (False, True):
            name = "handler under an effect key = job id" if guarded else "plain handler"
            deliveries, mails = await lab.crash_before_ack(guarded)
            print(f"{name:<45} deliveries={deliveries}  mails sent={mails}")
        print()
        print("Two workers, one job")
        print()
        for mode in ("wait", "raise"):
            a, b, mails = await lab.two_workers(mode)  # type: ignore[arg-type]
            print(f"{'in_flight=' + repr(mode):<20} {{'A': '{a}', 'B': '{b}'}}   mails sent={mails}")
        print()
        print("What the key is made of")
        print()
        for label, key, note in (
            ("key = job id: two jobs for order-9", None, "(the key must be the effect's identity, not the delivery's)"),
            ("key = 'order-9:invoice': the same two jobs", "order-9:invoice", "(a colon is an ordinary character in Sepp)"),
            ("key = 'order-9.invoice': the same two jobs", "order-9.invoice", ""),
        ):
            mails = await lab.key_made_of(key)
            print(f"{label:<45} -> mails sent={mails}   {note}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--addr", default="http://127.0.0.1:50051", help="the Sepp server")
    asyncio.run(main(parser.parse_args().addr))
