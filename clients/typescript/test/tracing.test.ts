// Tracing: a job enqueued by the Go client inside a Go span (a real Go
// producer, testdata/goproducer) is handled by the TypeScript worker in a
// span that continues that trace; an enqueue inside an active span carries the
// producer span's context to the handler's span; a job without one runs
// untraced.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { context, trace, propagation, SpanKind } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { SeppClient, Worker, Effects, type Logger, type WorkerJob } from "sepp";
import { execFileSync } from "node:child_process";
import { TestServer, repoDir } from "./server.js";

const quiet: Logger = { info() {}, warn() {} };
const exporter = new InMemorySpanExporter();

let server: TestServer;
before(async () => {
  // As an app would set OpenTelemetry up; no global propagator is set, so
  // the client's own W3C fallback is what carries the context.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  server = await TestServer.start("");
});
after(async () => {
  await server?.stop();
  trace.disable();
  context.disable();
  propagation.disable();
});

/** Runs a worker on queue until one job was handled; returns that job. */
async function handleOne(client: SeppClient, queue: string): Promise<WorkerJob> {
  const worker = new Worker(client, { queues: [queue], concurrency: 1, waitMs: 1000, logger: quiet });
  let handled!: (j: WorkerJob) => void;
  const got = new Promise<WorkerJob>((res) => (handled = res));
  worker.handleAll(async (job) => handled(job));
  const running = worker.run();
  const job = await got;
  await worker.stop();
  await running;
  return job;
}

test("a Go producer's trace is continued by the worker's handler span", async () => {
  // A real Go producer: the Go client enqueues inside a span of the Go
  // OpenTelemetry SDK (testdata/goproducer) and says which trace and which
  // producer span the job carries.
  const out = execFileSync("go", ["run", "./clients/typescript/test/testdata/goproducer", server.addr, "from-go"], {
    cwd: repoDir,
    encoding: "utf8",
  });
  const go = JSON.parse(out) as { traceId: string; producerSpanId: string; jobId: string };
  const client = await SeppClient.connect(server.addr);
  try {
    const job = await handleOne(client, "from-go");
    assert.equal(job.jobId, go.jobId);
    assert.equal(job.headers["traceparent"], `00-${go.traceId}-${go.producerSpanId}-01`);
    const span = exporter.getFinishedSpans().find((s) => s.name === "sepp.process from-go");
    assert.ok(span, `no sepp.process span among ${exporter.getFinishedSpans().map((s) => s.name)}`);
    assert.equal(span.spanContext().traceId, go.traceId);
    assert.equal(span.parentSpanContext?.spanId, go.producerSpanId);
    assert.equal(span.kind, SpanKind.CONSUMER);
    assert.equal(span.links[0]?.context.spanId, go.producerSpanId);
    assert.equal(span.attributes["messaging.system"], "sepp");
    assert.equal(span.attributes["messaging.destination.name"], "from-go");
    assert.equal(span.attributes["messaging.message.id"], go.jobId);
    assert.equal(span.attributes["sepp.job.attempt"], 1);
  } finally {
    client.close();
  }
});

test("an enqueue in an active span carries the producer span's context to the handler", async () => {
  const client = await SeppClient.connect(server.addr);
  try {
    const tracer = trace.getTracer("shop");
    const mine = { "X-Source": "checkout" };
    const { traceId, ack } = await tracer.startActiveSpan("checkout", async (span) => {
      const ack = await client.enqueue({ queue: "from-ts", jobType: "receipt", headers: mine });
      span.end();
      return { traceId: span.spanContext().traceId, ack };
    });
    assert.deepEqual(mine, { "X-Source": "checkout" }, "the caller's headers object was written to");
    const job = await handleOne(client, "from-ts");
    assert.equal(job.headers["X-Source"], "checkout");
    const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    const producer = spans.find((s) => s.name === "sepp.enqueue from-ts");
    const process = spans.find((s) => s.name === "sepp.process from-ts");
    assert.ok(producer && process, `spans of the trace: ${spans.map((s) => s.name)}`);
    assert.equal(producer.kind, SpanKind.PRODUCER);
    assert.equal(producer.attributes["messaging.message.id"], ack.jobId);
    assert.equal(process.parentSpanContext?.spanId, producer.spanContext().spanId);
    assert.match(job.headers["traceparent"] ?? "", new RegExp(`^00-${traceId}-${producer.spanContext().spanId}-01$`));
  } finally {
    client.close();
  }
});

test("a job without a trace context runs untraced, and gets no header", async () => {
  const client = await SeppClient.connect(server.addr);
  try {
    const before = exporter.getFinishedSpans().length;
    await client.enqueue({ queue: "plain", jobType: "t" });
    const job = await handleOne(client, "plain");
    assert.deepEqual(job.headers, {});
    assert.equal(exporter.getFinishedSpans().length, before);
  } finally {
    client.close();
  }
});

test("an effect in a traced handler is a span of its own, the handler span's child", async () => {
  const client = await SeppClient.connect(server.addr);
  try {
    const traceId = "0af7651916cd43dd8448eb211c80319c";
    await client.enqueue({ queue: "effects", jobType: "t", headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } });
    const effects = new Effects(client);
    const worker = new Worker(client, { queues: ["effects"], concurrency: 1, waitMs: 1000, logger: quiet });
    let handled!: () => void;
    const got = new Promise<void>((res) => (handled = res));
    worker.handleAll(async () => {
      await effects.do("mail.receipt", "order-7", async () => "sent");
      await effects.do("mail.receipt", "order-7", async () => "sent again");
      handled();
    });
    const running = worker.run();
    await got;
    await worker.stop();
    await running;
    const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    const process = spans.find((s) => s.name === "sepp.process effects");
    const effectSpans = spans.filter((s) => s.name === "sepp.effect mail.receipt");
    assert.ok(process, `spans of the trace: ${spans.map((s) => s.name)}`);
    assert.deepEqual(
      effectSpans.map((s) => s.attributes["sepp.effect.outcome"]),
      ["ran", "replayed"],
    );
    for (const s of effectSpans) {
      assert.equal(s.parentSpanContext?.spanId, process.spanContext().spanId);
      assert.equal(s.attributes["sepp.effect.key"], "order-7");
    }
  } finally {
    client.close();
  }
});
