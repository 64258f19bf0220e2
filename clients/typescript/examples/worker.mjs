// A worker: handlers by job type, concurrency, lease extension in the
// background, permanent failures, and a graceful stop on SIGTERM that lets
// running jobs finish.
//
//   node examples/worker.mjs [http://127.0.0.1:50051]
//
// It enqueues three jobs, works until they are done, then stops.
import { SeppClient, Worker, PermanentError, bytesToText } from "sepp";

const client = await SeppClient.connect(process.argv[2] ?? "http://127.0.0.1:50051");
const queue = `emails-${Date.now().toString(36)}`;

const worker = new Worker(client, { queues: [queue], concurrency: 16 });
worker.handle("receipt", async (job) => {
  const to = bytesToText(job.payload);
  if (!to.includes("@")) throw new PermanentError(`malformed address ${JSON.stringify(to)}`); // dead-lettered at once
  // ... send the mail, passing job.signal to anything that can be aborted ...
  return `sent to ${to}`; // stored as the job's result
});
process.once("SIGTERM", () => void worker.stop());
const running = worker.run();

const ids = [];
for (const to of ["ada@example.com", "grace@example.com", "nobody"]) {
  ids.push((await client.enqueue({ queue, jobType: "receipt", payload: to, idempotencyKey: `receipt-${to}` })).jobId);
}
for (;;) {
  const jobs = await Promise.all(ids.map((id) => client.getJob(id)));
  if (jobs.every((j) => j.state === "completed" || j.state === "dead")) {
    for (const j of jobs) console.log(`${bytesToText(j.payload)}: ${j.state} ${j.state === "dead" ? j.lastError : bytesToText(j.result)}`);
    break;
  }
  await new Promise((r) => setTimeout(r, 50));
}
await worker.stop();
await running;
console.log("worker stopped");
