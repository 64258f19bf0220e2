"""An order and its confirmation mail in one transaction: the job is written
as a row of the outbox table in the app's own PostgreSQL database, and
`sepp serve` (with the database in its [[outboxes]]) relays it into a job
once the transaction has committed. A transaction that rolls back leaves no
row, so no job.

    sepp outbox schema --dialect postgres | psql "$APP_DATABASE_URL"   # once
    APP_DATABASE_URL=postgres://app@127.0.0.1/app PYTHONPATH=src /usr/bin/python3 examples/outbox_orders.py
"""

import json
import os
import uuid

import psycopg

from sepp import EnqueueRequest, outbox


def place_order(conn: psycopg.Connection, sku: str, cents: int) -> str:
    """Writes the order and its confirmation job in one transaction."""
    order_id = str(uuid.uuid4())
    with conn.transaction():
        conn.execute("INSERT INTO orders (id, sku, cents) VALUES (%s, %s, %s)", (order_id, sku, cents))
        row_id = outbox.enqueue(conn, EnqueueRequest(
            "emails", "order_confirmation",
            payload=json.dumps({"order": order_id}),
            idempotency_key=f"confirm-{order_id}",
        ))
    print(f"order {order_id} placed, its confirmation is outbox row {row_id}")
    return order_id


def main() -> None:
    with psycopg.connect(os.environ["APP_DATABASE_URL"], autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, sku TEXT NOT NULL, cents INTEGER NOT NULL)")
        place_order(conn, "book-42", 1999)
        try:
            with conn.transaction():
                outbox.enqueue(conn, EnqueueRequest("emails", "order_confirmation", payload=b"{}"))
                raise RuntimeError("payment declined")
        except RuntimeError as err:
            print(f"rolled back ({err}): no row, no job")
        rows = conn.execute("SELECT count(*) FROM sepp_outbox").fetchone()[0]
        print(f"rows in sepp_outbox now: {rows} (until the relay takes them)")


if __name__ == "__main__":
    main()
