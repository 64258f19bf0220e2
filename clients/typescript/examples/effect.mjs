// An effect key inside a worker: the mail goes out once per order, however
// many jobs (or redeliveries) ask for it. The key names the effect
// ("order-9.invoice"), not the delivery.
//
//   node examples/effect.mjs [http://127.0.0.1:50051]
import { SeppClient, Effects, Worker } from "sepp";

const client = await SeppClient.connect(process.argv[2] ?? "http://127.0.0.1:50051");
const effects = new Effects(client);
const run = Date.now().toString(36);
const queue = `invoices-${run}`;
let mailsSent = 0;

const worker = new Worker(client, { queues: [queue], concurrency: 4 });
worker.handle("invoice", async (job) => {
  const order = JSON.parse(new TextDecoder().decode(job.payload)).order;
  const res = await effects.do(`mail.invoice.${run}`, `${order}.invoice`, async () => `em_${++mailsSent}`, {
    mode: "wait", // another worker running it: wait for its receipt ("raise" throws EffectInProgressError)
    ttlMs: 24 * 3600_000,
  });
  return res.text(); // the receipt: from this run, or replayed from the first
});
const running = worker.run();

// Two jobs for the same order: a retrying producer, or two code paths.
const a = await client.enqueue({ queue, jobType: "invoice", payload: JSON.stringify({ order: "order-9", from: "checkout" }) });
const b = await client.enqueue({ queue, jobType: "invoice", payload: JSON.stringify({ order: "order-9", from: "backfill" }) });
for (;;) {
  const jobs = await Promise.all([a, b].map((x) => client.getJob(x.jobId)));
  if (jobs.every((j) => j.state === "completed")) {
    console.log(`two jobs, receipts ${jobs.map((j) => new TextDecoder().decode(j.result)).join(" and ")}, mails sent=${mailsSent}`);
    break;
  }
  await new Promise((r) => setTimeout(r, 50));
}
await worker.stop();
await running;
