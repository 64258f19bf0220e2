// The transactional outbox with node-postgres: the job is a row written in
// the app's own transaction, so it exists if and only if the transaction
// commits; `sepp serve` relays the row into a job. The table comes from
// `sepp outbox schema --dialect postgres`.
//
//   node examples/outbox.mjs [postgres://user@host/db]
import pg from "pg";
import { enqueue } from "sepp/outbox";

const pool = new pg.Pool({ connectionString: process.argv[2] ?? process.env.DATABASE_URL });
const db = await pool.connect();
try {
  await db.query("BEGIN");
  // ... the app's own writes, e.g. INSERT INTO orders ...
  const rowId = await enqueue(db, {
    queue: "emails",
    jobType: "order_confirmation",
    payload: JSON.stringify({ order: 42 }),
    idempotencyKey: "order-42-confirmation", // optional: without one, the row's id is the key
  });
  await db.query("COMMIT");
  console.log(`committed outbox row ${rowId}`);
} catch (err) {
  await db.query("ROLLBACK");
  throw err;
} finally {
  db.release();
  await pool.end();
}
