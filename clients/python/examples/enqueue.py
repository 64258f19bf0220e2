"""Enqueue with every field: payload bytes, key, priority, run-at, max
attempts, headers; then read the job back and see the dedup hit.

    PYTHONPATH=src /usr/bin/python3 examples/enqueue.py [http://127.0.0.1:50051]
"""

import asyncio
import json
from datetime import datetime, timedelta, timezone

from _addr import address
from sepp import EnqueueRequest, SeppClient


async def main() -> None:
    async with SeppClient.connect(address()) as client:
        request = EnqueueRequest(
            "emails",
            "receipt",
            payload=json.dumps({"order": "8a3f", "to": "ada@example.com"}).encode(),
            idempotency_key="receipt-order-8a3f-example",
            priority=5,
            run_at=datetime.now(timezone.utc) + timedelta(minutes=10),
            max_attempts=3,
            headers={"trace-id": "4bf92f3577b34da6"},
        )
        ack = await client.enqueue(request)
        print(f"job {ack.job_id} deduplicated={ack.deduplicated} key honoured until {ack.dedup_expires_at}")

        job = await client.get_job(ack.job_id)
        print(f"state={job.state.name} priority={job.priority} run_at={job.run_at} "
              f"max_attempts={job.max_attempts} headers={job.headers} payload={job.payload!r}")

        # The same key again: no second job, the original's id.
        again = await client.enqueue(request)
        print(f"again: deduplicated={again.deduplicated} same id={again.job_id == ack.job_id}")


if __name__ == "__main__":
    asyncio.run(main())
