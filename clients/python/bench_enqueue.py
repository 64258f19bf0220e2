"""Throughput of keyed enqueues through the Python client.

    /usr/bin/python3 bench_enqueue.py [--addr http://127.0.0.1:50051] [-n 100000] [-c 32] [--payload 256]

N enqueues, each with a unique idempotency key and a payload of PAYLOAD
random bytes, on queue "bench", from C concurrent callers (asyncio tasks) in
one process sharing one client. The client coalesces concurrent enqueues
into EnqueueBatch RPCs (natural batching), as the Go client does; add
--no-batching to send one Enqueue RPC per call. It prints one JSON line:

    {"client":"python","n":100000,"c":32,"seconds":...,"jobs_per_sec":...}

Compare with the Go client against the same server:
``sepp bench enqueue -addr http://127.0.0.1:PORT -n 100000 -c 32 -payload 256``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

from sepp import EnqueueRequest, SeppClient  # noqa: E402


async def run(addr: str, n: int, c: int, payload_size: int, batching: bool, queue: str) -> dict:
    """Runs the benchmark and returns its figures."""
    payload = os.urandom(payload_size)
    prefix = f"bench-{uuid.uuid4().hex[:12]}-"
    async with SeppClient.connect(addr, batching=batching, max_connections=max(8, c)) as client:
        next_i = 0
        created = 0

        async def caller() -> None:
            nonlocal next_i, created
            while next_i < n:
                i = next_i
                next_i += 1
                ack = await client.enqueue(
                    EnqueueRequest(queue, "bench", payload=payload, idempotency_key=prefix + str(i))
                )
                if not ack.deduplicated:
                    created += 1

        start = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(c)))
        seconds = time.perf_counter() - start
    if created != n:
        raise SystemExit(f"expected {n} new jobs, got {created}")
    return {
        "client": "python",
        "n": n,
        "c": c,
        "payload": payload_size,
        "batching": batching,
        "seconds": round(seconds, 3),
        "jobs_per_sec": round(n / seconds, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", "-addr", default="http://127.0.0.1:50051", help="the Sepp server")
    p.add_argument("-n", type=int, default=100_000, help="enqueues in all (default 100000)")
    p.add_argument("-c", type=int, default=32, help="concurrent callers (default 32)")
    p.add_argument("--payload", "-payload", type=int, default=256, help="payload bytes (default 256)")
    p.add_argument("--queue", default="bench", help='queue (default "bench")')
    p.add_argument("--no-batching", action="store_true", help="one Enqueue RPC per call")
    a = p.parse_args()
    out = asyncio.run(run(a.addr, a.n, a.c, a.payload, not a.no_batching, a.queue))
    print(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
