import asyncio
from sepp import SeppClient, EnqueueRequest

async def main() -> None:
    client = await SeppClient.connect("http://localhost:50051")

    # Derive the key from what the job is "about", so a retry of the same
    # logical enqueue carries the same key.
    request = EnqueueRequest(
        "emails",
        "receipt",
        idempotency_key="receipt-order-8a3f",
    )

    ack = await client.enqueue(request)
    if ack.deduplicated:
        print(f"already enqueued earlier as {ack.job_id}")
    else:
        print(f"enqueued {ack.job_id}")

if __name__ == "__main__":
    asyncio.run(main())
