// Idempotency-Key for a fetch-style handler, (req: Request) => Response,
// here under Hono on Node; the same wrapper fits Next.js route handlers,
// Bun.serve and Deno.serve. A retried POST /orders creates one order.
//
//   node examples/http-idempotency-fetch.mjs [http://127.0.0.1:50051]
import { Hono } from "hono";
import { serve } from "@hono/node-server";
import { SeppClient } from "sepp";
import { fetchIdempotency } from "sepp/idempotency";

const client = await SeppClient.connect(process.argv[2] ?? "http://127.0.0.1:50051");
let orders = 0;

const idempotent = fetchIdempotency(client, { scope: "api.orders", required: true });
const createOrder = idempotent(async (req) => {
  const { sku } = await req.json();
  const id = ++orders;
  return Response.json({ id, sku }, { status: 201, headers: { Location: `/orders/${id}` } });
});

const app = new Hono();
app.post("/orders", (c) => createOrder(c.req.raw));
const server = serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000) });

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
const res = await fetch(url, { method: "POST", headers: { "Idempotency-Key": key }, body: JSON.stringify({ sku: "b-2" }) });
console.log(`same key, another order: ${res.status} ${(await res.json()).reason}`);
console.log(`orders created: ${orders}`);
server.close();
client.close();
