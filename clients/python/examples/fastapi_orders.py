"""An app's own HTTP API whose POST /orders is safe to retry: a client sends
an Idempotency-Key header, and a retry with the same key gets the stored
answer instead of a second order, whichever instance of the app it reaches.

    cd clients/python/examples
    SEPP_ADDR=http://127.0.0.1:50051 PYTHONPATH=../src /usr/bin/python3 -m uvicorn fastapi_orders:app --port 8000
"""

import os
import uuid

from fastapi import FastAPI, Response
from pydantic import BaseModel

from sepp import SeppClient
from sepp.idempotency import IdempotencyMiddleware

app = FastAPI()


@app.on_event("startup")
async def connect_sepp() -> None:
    app.state.sepp = await SeppClient.connect(os.environ.get("SEPP_ADDR", "http://127.0.0.1:50051"))


@app.on_event("shutdown")
async def close_sepp() -> None:
    await app.state.sepp.close()


app.add_middleware(
    IdempotencyMiddleware,
    client=lambda: app.state.sepp,  # the client connected at startup
    scope="api.orders",             # keys are unique per scope
    required=True,                  # a POST or PATCH without the header gets 400
)


class Order(BaseModel):
    sku: str
    quantity: int = 1


@app.post("/orders", status_code=201)
async def create_order(order: Order, response: Response) -> dict:
    order_id = str(uuid.uuid4())  # insert the order here
    response.headers["Location"] = f"/orders/{order_id}"
    return {"id": order_id, "sku": order.sku, "quantity": order.quantity}
