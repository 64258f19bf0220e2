"""A FastAPI app behind :class:`sepp.idempotency.IdempotencyMiddleware`, which
the idempotency tests serve with uvicorn (one process or two)::

    SEPP_ADDR=http://127.0.0.1:50051 python3 -m uvicorn idem_app:app --port 8000

``POST /orders`` creates an order (counted in ``runs``) and answers 201 with
its number, a ``Location`` and a header the middleware does not store;
``PUT /control`` sets how it behaves (``fail``: answer 500, ``raise``: raise,
``delay``: seconds to take, ``gated``: wait for ``{"open": true}``);
``GET /state`` says how many times it ran and was entered; ``GET /orders``
passes through the middleware.

Environment: ``SEPP_ADDR`` (required), ``IDEM_SCOPE`` (default
``api.orders``), ``IDEM_LEASE`` (seconds, default 30).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Dict

from fastapi import FastAPI, Request, Response

from sepp import SeppClient
from sepp.idempotency import IdempotencyMiddleware

app = FastAPI()
state: Dict[str, Any] = {"runs": 0, "entered": 0, "fail": False, "raise": False, "delay": 0.0, "gated": False}
gate = asyncio.Event()


@app.on_event("startup")
async def connect_sepp() -> None:
    app.state.sepp = await SeppClient.connect(os.environ["SEPP_ADDR"])


@app.on_event("shutdown")
async def close_sepp() -> None:
    await app.state.sepp.close()


app.add_middleware(
    IdempotencyMiddleware,
    client=lambda: app.state.sepp,
    scope=os.environ.get("IDEM_SCOPE", "api.orders"),
    required=True,
    lease=float(os.environ.get("IDEM_LEASE", "30")),
)


@app.post("/orders")
async def create_order(request: Request) -> Response:
    body = await request.body()
    state["entered"] += 1
    if state["gated"]:
        await gate.wait()
    if state["delay"]:
        await asyncio.sleep(state["delay"])
    if state["raise"]:
        raise RuntimeError("handler broke")
    if state["fail"]:
        return Response("database down", status_code=500)
    state["runs"] += 1
    n = state["runs"]
    return Response(
        json.dumps({"order": n, "app": "python", "request": body.decode()}, separators=(",", ":")),
        status_code=201,
        media_type="application/json",
        headers={"Location": f"/orders/{n}", "X-Not-Stored": "1"},
    )


@app.get("/orders")
async def list_orders() -> Dict[str, int]:
    return {"orders": state["runs"]}


@app.put("/control")
async def control(request: Request) -> Dict[str, Any]:
    change = await request.json()
    if change.pop("open", False):
        gate.set()
    state.update(change)
    return {k: v for k, v in state.items()}


@app.get("/state")
async def get_state() -> Dict[str, Any]:
    return {k: v for k, v in state.items()}
