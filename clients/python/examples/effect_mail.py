"""An effect key inside a handler: the invoice mail goes out once however
many deliveries of however many jobs ask for it.

    PYTHONPATH=src /usr/bin/python3 examples/effect_mail.py [http://127.0.0.1:50051]
"""

import asyncio

from _addr import address
from sepp import DeliveredJob, EnqueueRequest, SeppClient, Worker, effect

sent = 0


async def send_invoice(order: str) -> bytes:
    """The external effect: a mail provider that returns a message id."""
    global sent
    sent += 1
    await asyncio.sleep(0.05)
    return f"msg-{order}-{sent}".encode()


async def main() -> None:
    async with SeppClient.connect(address()) as client:
        # Two jobs for the same order (two code paths both decided to send).
        for n in range(2):
            await client.enqueue(EnqueueRequest("billing", "invoice", payload=b"order-9"))

        done = asyncio.Event()
        handled = 0
        worker = Worker(client, "billing", concurrency=2, wait=0.5)

        @worker.handler("invoice")
        async def invoice(job: DeliveredJob) -> bytes:
            nonlocal handled
            order = job.payload.decode()
            # Name the effect, not the delivery: the invoice of this order.
            res = await effect.do(client, "mail.invoice", f"{order}.invoice", lambda: send_invoice(order),
                                  mode="wait", ttl=7 * 24 * 3600)
            print(f"job {job.job_id}: message {res.value.decode()} (replayed={res.replayed})")
            handled += 1
            if handled == 2:
                done.set()
            return res.value

        async with worker:
            await done.wait()
    print(f"mails sent: {sent}")


if __name__ == "__main__":
    asyncio.run(main())
