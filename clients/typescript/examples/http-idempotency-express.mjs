// Idempotency-Key for an Express API: a client that retries POST /orders
// with the same key creates one order, and the retry gets the first answer,
// marked Idempotent-Replayed: true. The keys live in Sepp, so every
// instance of the app sees them.
//
//   node examples/http-idempotency-express.mjs [http://127.0.0.1:50051]
import express from "express";
import { SeppClient } from "sepp";
import { expressIdempotency } from "sepp/idempotency";

const client = await SeppClient.connect(process.argv[2] ?? "http://127.0.0.1:50051");
let orders = 0;

const app = express();
app.post(
  "/orders",
  expressIdempotency(client, { scope: "api.orders", required: true }), // before the body parser
  express.json(),
  (req, res) => {
    const id = ++orders;
    res.status(201).location(`/orders/${id}`).json({ id, sku: req.body.sku });
  },
);
const server = app.listen(Number(process.env.PORT ?? 3000));

// A client sending one order twice, as after a timeout, under one key.
await new Promise((resolve) => server.once("listening", resolve));
const url = `http://localhost:${server.address().port}/orders`;
const key = crypto.randomUUID(); // one per operation, sent again on every retry
for (const attempt of ["first", "retry"]) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "Idempotency-Key": key, "Content-Type": "application/json" },
    body: JSON.stringify({ sku: "a-1" }),
  });
  console.log(`${attempt}: ${res.status} ${await res.text()} replayed=${res.headers.get("Idempotent-Replayed")}`);
}
const res = await fetch(url, { method: "POST", body: "{}", headers: { "Content-Type": "application/json" } });
console.log(`no key: ${res.status} ${(await res.json()).reason}`);
console.log(`orders created: ${orders}`);
server.close();
client.close();
