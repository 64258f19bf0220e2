"""Tracing: the ``opentelemetry`` package is not a dependency of this
client (nor installable from Debian here), so the trace context a producer
wrote travels to the handler as it was written: the ``traceparent`` and
``tracestate`` headers, which ``DeliveredJob.traceparent`` and
``DeliveredJob.tracestate`` read."""

from __future__ import annotations

import asyncio
from typing import List

from sepp import DeliveredJob, EnqueueRequest, SeppClient, Worker

# What the Go client writes for a producer span (W3C Trace Context).
GO_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def test_handler_sees_the_producers_trace_context(client: SeppClient, queue: str) -> None:
    traced = await client.enqueue(
        EnqueueRequest(queue, "t", headers={"traceparent": GO_TRACEPARENT, "tracestate": "vendor=1"})
    )
    plain = await client.enqueue(EnqueueRequest(queue, "t"))
    seen: List[DeliveredJob] = []
    both = asyncio.Event()
    worker = Worker(client, queue, concurrency=1, wait=0.2)

    @worker.handler("t")
    async def handle(job: DeliveredJob) -> None:
        seen.append(job)
        if len(seen) == 2:
            both.set()

    async with worker:
        await asyncio.wait_for(both.wait(), timeout=60)
    by_id = {j.job_id: j for j in seen}
    assert by_id[traced.job_id].traceparent == GO_TRACEPARENT
    assert by_id[traced.job_id].tracestate == "vendor=1"
    assert by_id[plain.job_id].traceparent is None and by_id[plain.job_id].tracestate is None
    assert by_id[plain.job_id].headers == {}
