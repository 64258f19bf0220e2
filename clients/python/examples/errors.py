"""Typed errors: one exception class per reason, all under SeppError; the
key checks run locally, in bytes of UTF-8, before anything is sent.

    PYTHONPATH=src /usr/bin/python3 examples/errors.py [http://127.0.0.1:50051]
"""

import asyncio

from _addr import address
from sepp import (
    EnqueueRequest,
    IdempotencyKeyEmptyError,
    IdempotencyKeyTooLongError,
    SeppClient,
    SeppError,
    UnknownQueueError,
)


async def main() -> None:
    async with SeppClient.connect(address()) as client:
        for key in ("é" * 129, ""):  # 258 bytes in 129 characters; empty
            try:
                await client.enqueue(EnqueueRequest("emails", "receipt", idempotency_key=key))
            except (IdempotencyKeyTooLongError, IdempotencyKeyEmptyError) as err:
                print(f"refused locally, nothing sent: {type(err).__name__} {err.code} {err.reason}: {err.message}")
        try:
            await client.enqueue(EnqueueRequest("emails ", "receipt"))
        except UnknownQueueError:
            print("the server is strict and does not know the queue")
        except SeppError as err:
            print(f"{type(err).__name__} code={err.code} reason={err.reason} metadata={err.metadata}: {err.message}")


if __name__ == "__main__":
    asyncio.run(main())
