/**
 * OpenTelemetry tracing, when the app has `@opentelemetry/api` installed (an
 * optional peer dependency): `enqueue` and `enqueueBatch` called inside an
 * active span run in a producer span `sepp.enqueue <queue>` and carry its W3C
 * trace context in the jobs' headers (`traceparent`, `tracestate`); the
 * worker runs a handler whose job carries a `traceparent` in a consumer span
 * `sepp.process <queue>`, the producer's child, and `Effects.do` inside it
 * in a span `sepp.effect <scope>`. Without the package, or without an
 * active span, nothing is added and nothing is traced.
 *
 * @internal
 * @module
 */
import type * as OtelApi from "@opentelemetry/api";
import { EffectInProgressError } from "./errors.js";
import { utf8Length } from "./keys.js";

type Api = typeof OtelApi;
type Headers = Record<string, string>;

/** The instrumentation scope of the spans, as in the Go client. */
const TRACER_NAME = "github.com/sepp-dev/sepp";

// The server's limits on a job's headers (MaxHeaderEntries and
// MaxHeaderBytes in internal/config): the trace context is left out rather
// than push a job the server would accept over them.
const MAX_HEADER_ENTRIES = 64;
const MAX_HEADER_BYTES = 64 << 10;

// undefined: not looked for yet; null: not installed.
let api: Api | null | undefined;
let loading: Promise<Api | null> | undefined;

// The specifier is a variable so that bundlers leave the import to run
// time: an app without the package must still bundle this client.
const OTEL_API = "@opentelemetry/api";

/** Loads `@opentelemetry/api` once; null when the app does not have it. */
function loadApi(): Promise<Api | null> {
  loading ??= (import(/* webpackIgnore: true */ OTEL_API) as Promise<Api>).then(
    (m) => (api = m),
    () => (api = null),
  );
  return loading;
}

/** Writes ctx's trace context into a carrier: the global propagator, and W3C if it wrote no traceparent (an app that set none). */
function inject(a: Api, ctx: OtelApi.Context): Headers {
  const carrier: Headers = {};
  a.propagation.inject(ctx, carrier);
  if (carrier.traceparent === undefined) {
    const sc = a.trace.getSpanContext(ctx);
    if (sc && a.trace.isSpanContextValid(sc)) {
      carrier.traceparent = `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
      const state = sc.traceState?.serialize();
      if (state) carrier.tracestate = state;
    }
  }
  return carrier;
}

/** Reads a job's trace context: the global propagator, else its W3C traceparent. */
function extract(a: Api, headers: Headers): OtelApi.Context | undefined {
  const ctx = a.propagation.extract(a.context.active(), headers);
  if (a.trace.getSpanContext(ctx) && a.trace.isSpanContextValid(a.trace.getSpanContext(ctx)!)) return ctx;
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(headers.traceparent ?? "");
  if (!m) return undefined;
  const sc: OtelApi.SpanContext = { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16), isRemote: true };
  return a.trace.isSpanContextValid(sc) ? a.trace.setSpanContext(a.context.active(), sc) : undefined;
}

/**
 * Adds carrier to a job's headers, in a copy (the caller's object is never
 * written). Adds nothing, and returns false, when the job sets a trace
 * header itself (the caller's wins) or would go over the header limits.
 */
function addHeaders(job: { headers?: Headers }, carrier: Headers): boolean {
  const own = job.headers ?? {};
  let size = 0;
  let count = 0;
  for (const [k, v] of Object.entries(own)) {
    const lower = k.toLowerCase();
    if (lower === "traceparent" || lower === "tracestate") return false;
    size += utf8Length(k) + utf8Length(v);
    count++;
  }
  for (const [k, v] of Object.entries(carrier)) {
    size += utf8Length(k) + utf8Length(v);
    count++;
  }
  if (count > MAX_HEADER_ENTRIES || size > MAX_HEADER_BYTES) return false;
  job.headers = { ...own, ...carrier };
  return true;
}

function recordError(a: Api, span: OtelApi.Span, err: unknown): void {
  span.recordException(err instanceof Error ? err : String(err));
  span.setStatus({ code: a.SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
}

/**
 * Runs send, an enqueue of jobs, in a producer span when the caller is in
 * an active span, with the span's context added to each job's headers.
 *
 * @internal
 */
export function tracedEnqueue<T>(jobs: Array<{ queue?: string; headers?: Headers }>, send: () => Promise<T>): Promise<T> {
  // Once the package was looked for, an app that does not trace goes
  // straight to send: no await, no span, no header.
  if (api === undefined) return loadApi().then(() => tracedEnqueue(jobs, send));
  const active = api?.trace.getActiveSpan();
  if (!api || !active || !api.trace.isSpanContextValid(active.spanContext()) || jobs.length === 0) return send();
  return enqueueInSpan(api, jobs, send);
}

function enqueueInSpan<T>(a: Api, jobs: Array<{ queue?: string; headers?: Headers }>, send: () => Promise<T>): Promise<T> {
  const queue = jobs.every((j) => j.queue === jobs[0]!.queue) ? jobs[0]!.queue : undefined;
  const attributes: OtelApi.Attributes = {
    "messaging.system": "sepp",
    "messaging.operation.type": "send",
    "messaging.operation.name": "enqueue",
  };
  if (queue !== undefined) attributes["messaging.destination.name"] = queue;
  if (jobs.length > 1) attributes["messaging.batch.message_count"] = jobs.length;
  const name = queue !== undefined ? `sepp.enqueue ${queue}` : "sepp.enqueue";
  return a.trace.getTracer(TRACER_NAME).startActiveSpan(name, { kind: a.SpanKind.PRODUCER, attributes }, async (span) => {
    const carrier = inject(a, a.context.active());
    const skipped = jobs.filter((j) => !addHeaders(j, carrier)).length;
    if (skipped > 0) span.addEvent("sepp.trace_context_not_injected", { "sepp.jobs": skipped });
    try {
      const res = await send();
      const jobId = (res as { jobId?: unknown } | undefined)?.jobId;
      if (typeof jobId === "string") span.setAttribute("messaging.message.id", jobId);
      return res;
    } catch (err) {
      recordError(a, span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * Runs handle, a job's handler, in a consumer span `sepp.process <queue>`
 * continuing the trace of the job's `traceparent` header: the producer
 * span's child, linked to it too (the OpenTelemetry messaging conventions).
 * A job without the header runs as it is.
 *
 * @internal
 */
export function tracedProcess<T>(
  job: { jobId: string; queue: string; jobType: string; attempt: number; headers: Headers },
  handle: () => Promise<T>,
): Promise<T> {
  if (job.headers.traceparent === undefined) return handle();
  if (api === undefined) return loadApi().then(() => tracedProcess(job, handle));
  const a = api;
  const parent = a ? extract(a, job.headers) : undefined;
  if (!a || !parent) return handle();
  const producer = a.trace.getSpanContext(parent)!;
  const options: OtelApi.SpanOptions = {
    kind: a.SpanKind.CONSUMER,
    links: [{ context: producer }],
    attributes: {
      "messaging.system": "sepp",
      "messaging.operation.type": "process",
      "messaging.operation.name": "process",
      "messaging.destination.name": job.queue,
      "messaging.message.id": job.jobId,
      "sepp.job.type": job.jobType,
      "sepp.job.attempt": job.attempt,
    },
  };
  return a.trace.getTracer(TRACER_NAME).startActiveSpan(`sepp.process ${job.queue}`, options, parent, async (span) => {
    try {
      return await handle();
    } catch (err) {
      recordError(a, span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * Runs an `Effects.do` call in a span `sepp.effect <scope>`, the child of
 * the active span (a traced handler's), when there is one. Its
 * `sepp.effect.outcome` says what the call did: `ran`, `replayed` (a stored
 * result came back; fn did not run), `unprotected` (failOpen), `failed` (fn
 * threw, or its result could not be recorded), `in_progress` (raise mode)
 * or `not_run`.
 *
 * @internal
 */
export function tracedEffect<R extends { replayed: boolean; unprotected: boolean }, A extends unknown[], V>(
  scope: string,
  key: string,
  fn: (...args: A) => V,
  run: (fn: (...args: A) => V) => Promise<R>,
): Promise<R> {
  if (api === undefined) return loadApi().then(() => tracedEffect(scope, key, fn, run));
  const active = api?.trace.getActiveSpan();
  if (!api || !active || !api.trace.isSpanContextValid(active.spanContext())) return run(fn);
  const a = api;
  const attributes = { "messaging.system": "sepp", "sepp.effect.scope": scope, "sepp.effect.key": key };
  return a.trace.getTracer(TRACER_NAME).startActiveSpan(`sepp.effect ${scope}`, { attributes }, async (span) => {
    let ran = false;
    try {
      const res = await run((...args: A) => {
        ran = true;
        return fn(...args);
      });
      span.setAttribute("sepp.effect.outcome", res.replayed ? "replayed" : res.unprotected ? "unprotected" : "ran");
      return res;
    } catch (err) {
      span.setAttribute("sepp.effect.outcome", ran ? "failed" : err instanceof EffectInProgressError ? "in_progress" : "not_run");
      recordError(a, span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}
