// The lab of the post on handler-side idempotency, replayed against a real
// Sepp server with the TypeScript effect helper (as the Go lab in
// examples/invoicelab does), printing its three tables with Sepp's figures.
//
//   node examples/invoicelab.mjs [http://127.0.0.1:50051]
//
// Every scene uses the real API: jobs are enqueued and reserved under
// leases, a "crash" is a worker that stops before it acknowledges, and the
// mailer is a counter that returns receipts em_1, em_2, ...
import { SeppClient, Effects, EffectInProgressError } from "sepp";

/** The job lease of the lab's queues: short, so redeliveries come fast. */
const lease = 300;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Counts mails and returns receipts. */
function mailer() {
  const m = {
    sent: 0,
    send: (took) => async () => {
      const n = ++m.sent;
      await sleep(took);
      return `em_${n}`;
    },
  };
  return m;
}

/** Runs the three scenes and returns their figures. */
export async function runLab(client) {
  const effects = new Effects(client);
  const run = Date.now().toString(36);
  let n = 0;
  const fresh = () => {
    n++;
    return { queue: `lab-${run}-${n}`, scope: `mail.invoice.${run}.${n}` };
  };
  const reserve = async (queue) => {
    const r = await client.reserve({ queues: [queue], leaseMs: lease, waitMs: 10_000 });
    if (r.length !== 1) throw new Error(`reserve from ${queue}: ${r.length} jobs`);
    return r[0];
  };

  // The crash before the ack: the worker sends the mail and dies before
  // complete; the lease ends and the job is delivered again.
  const crashBeforeAck = async (guarded) => {
    const { queue, scope } = fresh();
    await client.enqueue({ queue, jobType: "invoice", payload: "order-9" });
    const m = mailer();
    const handle = async (r) => {
      if (!guarded) return m.send(0)();
      const res = await effects.do(scope, r.job.jobId, m.send(0), { ttlMs: 3600_000 });
      return res.text();
    };
    await handle(await reserve(queue)); // then the worker dies: no complete
    const second = await reserve(queue);
    const receipt = await handle(second);
    await client.complete(second.job.jobId, second.leaseToken, receipt);
    return { deliveries: second.attempt, mails: m.sent };
  };

  // Two workers, one job: A is slow, the job's lease ends, B gets the same
  // job while A still runs the effect.
  const twoWorkers = async (mode) => {
    const { queue, scope } = fresh();
    await client.enqueue({ queue, jobType: "invoice" });
    const m = mailer();
    const opts = { ttlMs: 3600_000, mode };
    await reserve(queue); // A's delivery
    const aDone = effects.do(scope, "order-9.invoice", m.send(3 * lease), opts).then((r) => r.text());
    const bJob = await reserve(queue); // after A's job lease ended
    let a;
    let b;
    try {
      b = (await effects.do(scope, "order-9.invoice", m.send(0), opts)).text();
      a = await aDone;
      // (B waited longer than its job lease, so the job is not B's to
      // complete any more; as in the Go lab, the scene ends here.)
    } catch (err) {
      if (!(err instanceof EffectInProgressError)) throw err;
      b = "in progress, requeue";
      await client.fail(bJob.job.jobId, bJob.leaseToken, err.message);
      a = await aDone;
      // The next delivery replays A's receipt.
      const next = await reserve(queue);
      const res = await effects.do(scope, "order-9.invoice", m.send(0), opts);
      if (res.text() !== a || !res.replayed) throw new Error(`the delivery after the requeue got ${res.text()}`);
      await client.complete(next.job.jobId, next.leaseToken, res.value);
    }
    return { a, b, mails: m.sent };
  };

  // What the key is made of: two jobs for order 9, handled under `key` (or,
  // when it is empty, under each job's id).
  const keyMadeOf = async (key) => {
    const { queue, scope } = fresh();
    const m = mailer();
    for (const i of [0, 1]) await client.enqueue({ queue, jobType: "invoice", payload: `order-9 #${i}` });
    for (const _ of [0, 1]) {
      const r = await reserve(queue);
      const res = await effects.do(scope, key || r.job.jobId, m.send(0), { ttlMs: 3600_000 });
      await client.complete(r.job.jobId, r.leaseToken, res.value);
    }
    return m.sent;
  };

  return {
    crash: { plain: await crashBeforeAck(false), guarded: await crashBeforeAck(true) },
    twoWorkers: { wait: await twoWorkers("wait"), raise: await twoWorkers("raise") },
    keys: { jobId: await keyMadeOf(""), colon: await keyMadeOf("order-9:invoice"), dot: await keyMadeOf("order-9.invoice") },
  };
}

/** Prints the lab's tables. */
export function printLab(lab) {
  const pad = (s, w) => s.padEnd(w);
  console.log("The crash before the ack\n");
  console.log(`${pad("plain handler", 45)} deliveries=${lab.crash.plain.deliveries}  mails sent=${lab.crash.plain.mails}`);
  console.log(`${pad("handler under an effect key = job id", 45)} deliveries=${lab.crash.guarded.deliveries}  mails sent=${lab.crash.guarded.mails}`);
  console.log("\nTwo workers, one job\n");
  for (const mode of ["wait", "raise"]) {
    const r = lab.twoWorkers[mode];
    console.log(`${pad(`in_flight='${mode}'`, 20)} {'A': '${r.a}', 'B': '${r.b}'}   mails sent=${r.mails}`);
  }
  console.log("\nWhat the key is made of\n");
  console.log(`${pad("key = job id: two jobs for order-9", 45)} -> mails sent=${lab.keys.jobId}   (the key must be the effect's identity, not the delivery's)`);
  console.log(`${pad("key = 'order-9:invoice': the same two jobs", 45)} -> mails sent=${lab.keys.colon}   (a colon is an ordinary character in Sepp)`);
  console.log(`${pad("key = 'order-9.invoice': the same two jobs", 45)} -> mails sent=${lab.keys.dot}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const client = await SeppClient.connect(process.argv[2] ?? "http://127.0.0.1:50051");
  printLab(await runLab(client));
}
