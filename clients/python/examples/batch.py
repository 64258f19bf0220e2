"""Batch enqueue: a non-atomic batch judged item by item, and an atomic one
that writes all or nothing.

    PYTHONPATH=src /usr/bin/python3 examples/batch.py [http://127.0.0.1:50051]
"""

import asyncio

from _addr import address
from sepp import EnqueueRequest, SeppClient, SeppError


async def main() -> None:
    async with SeppClient.connect(address()) as client:
        jobs = [
            EnqueueRequest("emails", "receipt", idempotency_key="batch-order-1"),
            EnqueueRequest("emails", "receipt", idempotency_key="batch-order-2"),
            EnqueueRequest("emails", "receipt", idempotency_key="batch-order-1"),  # a hit on item 0
            EnqueueRequest("emails", "receipt", idempotency_key="x" * 300),  # too long
        ]
        for i, r in enumerate(await client.enqueue_batch(jobs)):
            if r.ack:
                print(f"[{i}] job {r.ack.job_id} deduplicated={r.ack.deduplicated}")
            else:
                print(f"[{i}] error {type(r.error).__name__}: {r.error}")

        try:
            await client.enqueue_batch(jobs, atomic=True)
        except SeppError as err:
            print(f"atomic batch refused, nothing written: job {err.index}: {err.reason}")
        atomic = [
            EnqueueRequest("emails", "receipt", idempotency_key="batch-order-3"),
            EnqueueRequest("emails", "receipt", idempotency_key="batch-order-1"),  # a hit is no failure
        ]
        results = await client.enqueue_batch(atomic, atomic=True)
        print("atomic batch written, deduplicated:", [r.unwrap().deduplicated for r in results])


if __name__ == "__main__":
    asyncio.run(main())
