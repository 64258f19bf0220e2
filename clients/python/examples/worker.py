"""A worker: handlers by job type, concurrency, results, retries and dead
letters, and a graceful shutdown on SIGTERM or Ctrl-C.

    PYTHONPATH=src /usr/bin/python3 examples/worker.py [http://127.0.0.1:50051]

It enqueues a few jobs of its own, then works until a signal arrives.
"""

import asyncio
import json
import logging

from _addr import address
from sepp import DeliveredJob, EnqueueRequest, PermanentError, RetryAfterError, SeppClient, Worker


async def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    async with SeppClient.connect(address()) as client:
        for i in range(5):
            await client.enqueue(EnqueueRequest(
                "worker-example", "receipt", payload=json.dumps({"order": i}).encode(), idempotency_key=f"order-{i}"))
        await client.enqueue(EnqueueRequest("worker-example", "receipt", payload=b"not json", idempotency_key="order-bad"))

        worker = Worker(client, ["worker-example"], concurrency=16)

        @worker.handler("receipt")
        async def send_receipt(job: DeliveredJob) -> bytes:
            try:
                order = json.loads(job.payload)
            except ValueError as err:
                raise PermanentError(f"payload is not JSON: {err}") from err  # dead-letter now
            if order["order"] == 3 and job.attempt == 1:
                raise RetryAfterError("mail provider rate limit", delay=2)  # try again in 2 s
            await asyncio.sleep(0.1)  # send the mail
            return f"receipt for order {order['order']} sent".encode()  # stored as the job's result

        print("working; send SIGTERM or press Ctrl-C to stop (running jobs finish first)")
        await worker.run_until_signal()


if __name__ == "__main__":
    asyncio.run(main())
