"""A worker process for the crash and SIGTERM tests.

    worker_proc.py URL QUEUE MODE

MODE "hang": the handler prints "started <job id>" and never returns (the
test kills the process with SIGKILL). MODE "slow": it prints "started <job
id>", works for two seconds and returns b"finished" (the test sends SIGTERM
meanwhile). The worker runs until SIGTERM or SIGINT with
``Worker.run_until_signal`` and prints "stopped" after its graceful shutdown.
"""

from __future__ import annotations

import asyncio
import sys

from sepp import DeliveredJob, SeppClient, Worker


async def main(url: str, queue: str, mode: str) -> None:
    async with SeppClient.connect(url) as client:
        worker = Worker(client, queue, concurrency=1, wait=0.2)

        @worker.handler("t")
        async def handle(job: DeliveredJob) -> bytes:
            print(f"started {job.job_id}", flush=True)
            if mode == "hang":
                await asyncio.sleep(3600)
            await asyncio.sleep(2.0)
            return b"finished"

        await worker.run_until_signal()
        print("stopped", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
