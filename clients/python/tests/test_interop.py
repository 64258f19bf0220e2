"""The Python client and the Go client (through the ``sepp`` CLI, which is
built on it) see each other's jobs: a key enqueued by one is a hit for the
other, whichever goes first."""

from __future__ import annotations

import asyncio
import json

from sepp import EnqueueRequest, SeppClient
from sepp_server import SeppServer, sepp_binary


async def _cli_enqueue(server: SeppServer, queue: str, key: str) -> dict:
    proc = await asyncio.create_subprocess_exec(
        sepp_binary(), "enqueue", "--addr", server.url, "--queue", queue, "--type", "receipt", "--key", key, "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


async def test_python_then_go_is_a_hit(client: SeppClient, server: SeppServer, queue: str) -> None:
    ack = await client.enqueue(EnqueueRequest(queue, "receipt", idempotency_key="receipt-order-8a3f"))
    go = await _cli_enqueue(server, queue, "receipt-order-8a3f")
    assert go["deduplicated"] is True and go["jobId"] == ack.job_id


async def test_go_then_python_is_a_hit(client: SeppClient, server: SeppServer, queue: str) -> None:
    go = await _cli_enqueue(server, queue, "é-order-9")
    ack = await client.enqueue(EnqueueRequest(queue, "receipt", idempotency_key="é-order-9"))
    assert ack.deduplicated and ack.job_id == go["jobId"]
