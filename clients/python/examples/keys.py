"""Was this already enqueued? Look a key up, then release it so the next
enqueue with it starts a fresh job; get and cancel jobs.

    PYTHONPATH=src /usr/bin/python3 examples/keys.py [http://127.0.0.1:50051]
"""

import asyncio
from datetime import timedelta

from _addr import address
from sepp import EnqueueRequest, JobNotFoundError, SeppClient


async def main() -> None:
    async with SeppClient.connect(address()) as client:
        ack = await client.enqueue(
            EnqueueRequest("reports", "monthly", idempotency_key="report-2024-05", run_at=timedelta(hours=1))
        )
        look = await client.lookup_idempotency_key("reports", "report-2024-05")
        print(f"found={look.found} job={look.job_id} state={look.state.name} hits={look.hits} expires={look.expires_at}")

        job = await client.cancel_job(ack.job_id)
        print(f"cancelled: state={job.state.name}")

        released = await client.release_idempotency_key("reports", "report-2024-05")
        print(f"released={released.released} (it pointed to {released.job_id})")
        fresh = await client.enqueue(EnqueueRequest("reports", "monthly", idempotency_key="report-2024-05"))
        print(f"after release: a new job {fresh.job_id} (deduplicated={fresh.deduplicated})")

        try:
            await client.get_job("0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d")
        except JobNotFoundError as err:
            print(f"{err.reason}: {err.message}")


if __name__ == "__main__":
    asyncio.run(main())
