/**
 * Idempotency-Key middleware for an app's own HTTP API, following the IETF
 * draft "The Idempotency-Key HTTP Header Field": a request that carries an
 * `Idempotency-Key` runs its handler once, across any number of app
 * instances, and its repeats get the stored response.
 *
 * ```ts
 * import { expressIdempotency, fetchIdempotency } from "sepp/idempotency";
 *
 * // Express
 * app.post("/orders", expressIdempotency(client, { scope: "api.orders", required: true }), createOrder);
 *
 * // a fetch-style handler: Hono, Next.js route handlers, Bun, Deno
 * export const POST = fetchIdempotency(client, { scope: "api.orders", required: true })(createOrder);
 * ```
 *
 * The keys are Sepp effect keys (scope `options.scope`, key the header's
 * value): the first request with a key claims it, runs the handler and
 * stores its response (status, the headers `options.replayHeaders` names,
 * the body) as the effect's result for `options.ttlMs`. Then:
 *
 * - a repeat with the same method, route and body gets the stored response,
 *   with the header `Idempotent-Replayed: true`, and the handler does not run;
 * - a repeat while the first still runs gets 409 Conflict;
 * - the same key with another method, route or body gets 422;
 * - a request without the header on a route that requires one gets 400;
 * - a handler that answers 5xx or throws releases the key, so a retry runs
 *   it again; 2xx, 3xx and 4xx answers are stored.
 *
 * Errors are `application/problem+json` (RFC 9457) with a `reason` member.
 * It fails closed: when Sepp cannot be reached the handler does not run and
 * the client gets 503 with `Retry-After`.
 *
 * This mirrors the Go package `github.com/sepp-dev/sepp/idempotency`: the
 * same effect keys, the same request fingerprint and the same stored record,
 * so Go and TypeScript instances of one app can share a scope. Nothing here
 * imports Express: the Express middleware works on Node's request and
 * response objects.
 *
 * @module
 */
import { Reason, SeppError } from "./errors.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { SeppClient } from "./client.js";

/** The response header that marks a replayed response: `Idempotent-Replayed: true`. */
export const REPLAYED_HEADER = "Idempotent-Replayed";

/** The effect-key calls the middleware makes: a {@link SeppClient} (Node or browser build). */
export type IdempotencyClient = Pick<SeppClient, "claimEffect" | "completeEffect" | "releaseEffect" | "extendEffectLease">;

/** Options of {@link expressIdempotency} and {@link fetchIdempotency}. `scope` is required. */
export interface IdempotencyOptions<Req> {
  /** The effect scope the keys live under, like `"api.orders"`: keys are unique per scope. Required. */
  scope: string;
  /** Refuse a request without the header with 400. Default false. */
  required?: boolean;
  /** How long a stored response is replayed, in ms. Default 24 h. */
  ttlMs?: number;
  /** The request header. Default `"Idempotency-Key"`. */
  header?: string;
  /** The methods the middleware applies to; others pass through. Default POST and PATCH. */
  methods?: string[];
  /**
   * Bounds the request body (read to fingerprint it; a larger one gets 413)
   * and the stored response body (a larger response is sent, not stored,
   * and its key released). Default 1 MiB.
   */
  maxBodyBytes?: number;
  /** The response headers stored and replayed. Default Content-Type and Location. */
  replayHeaders?: string[];
  /** How long a claim holds while the handler runs, in ms; it is extended every third of it until the handler answers. Default 30 s. */
  leaseMs?: number;
  /** The request's route in its fingerprint. Default: the URL's path, percent-decoded. */
  route?: (req: Req) => string;
  /**
   * Bounds the handler, in ms. A fetch-style handler's request gets a
   * `signal` that ends then (as a Go handler's context does): a handler that
   * then gives up (throws) has its key released and the client gets 504
   * with reason `IDEMPOTENCY_HANDLER_TIMEOUT`; one that answers 2xx, 3xx or
   * 4xx anyway has that answer stored. Express has no such signal: when the
   * handler has not answered by then, the middleware releases the key,
   * answers the 504 itself and drops the late answer. Default 0: no bound.
   */
  timeoutMs?: number;
}

interface Settings {
  scope: string;
  required: boolean;
  ttlMs: number;
  header: string;
  methods: string[];
  maxBodyBytes: number;
  replayHeaders: string[];
  leaseMs: number;
  timeoutMs: number;
}

function settings(o: IdempotencyOptions<never>): Settings {
  if (!o || typeof o.scope !== "string" || o.scope === "") {
    throw new TypeError("idempotency: options.scope is required");
  }
  const positive = (v: number | undefined, d: number) => (v && v > 0 ? v : d);
  return {
    scope: o.scope,
    required: o.required ?? false,
    ttlMs: positive(o.ttlMs, 24 * 3600_000),
    header: o.header || "Idempotency-Key",
    methods: o.methods && o.methods.length > 0 ? [...o.methods] : ["POST", "PATCH"],
    maxBodyBytes: positive(o.maxBodyBytes, 1 << 20),
    replayHeaders: o.replayHeaders ?? ["Content-Type", "Location"],
    leaseMs: positive(o.leaseMs, 30_000),
    timeoutMs: positive(o.timeoutMs, 0),
  };
}

// ---- answers ------------------------------------------------------------

/** A response the middleware sends itself: a problem, or a replay. */
interface Answer {
  status: number;
  headers: Array<[string, string]>;
  body: Uint8Array;
}

/** Go's http.StatusText for the statuses the middleware answers with. */
const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  409: "Conflict",
  413: "Request Entity Too Large",
  422: "Unprocessable Entity",
  500: "Internal Server Error",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

const encoder = new TextEncoder();

/** JSON as Go's encoding/json writes it: <, >, &, U+2028 and U+2029 escaped. */
function goJSON(v: unknown): string {
  return JSON.stringify(v).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** An RFC 9457 problem with a reason member, byte for byte as the Go middleware writes it. */
function problem(status: number, reason: string, detail: string, headers: Array<[string, string]> = []): Answer {
  const body = goJSON({ detail, reason, status, title: STATUS_TEXT[status] ?? "", type: "about:blank" }) + "\n";
  return { status, headers: [...headers, ["Content-Type", "application/problem+json"]], body: encoder.encode(body) };
}

/** The answer when the effect records cannot be used. */
function unavailable(err: unknown): Answer {
  if (err instanceof SeppError && err.reason !== Reason.Unavailable) {
    return problem(500, err.reason, "the idempotency record could not be used: " + err.rawMessage);
  }
  return problem(
    503,
    Reason.Unavailable,
    "the idempotency records are unreachable, so the request was not run; retry it with the same key",
    [["Retry-After", "1"]],
  );
}

function tooLarge(max: number): Answer {
  return problem(413, "PAYLOAD_TOO_LARGE", `the request body is larger than ${max} bytes`);
}

function unreadable(err: unknown): Answer {
  return problem(400, "BODY_UNREADABLE", "the request body could not be read: " + (err instanceof Error ? err.message : String(err)));
}

function timedOut(): Answer {
  return problem(
    504,
    "IDEMPOTENCY_HANDLER_TIMEOUT",
    "the handler did not answer in time; nothing was stored under this key, so a retry runs it again",
  );
}

// ---- bytes --------------------------------------------------------------

const fatalUTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The bytes of a header value as it came off the wire: HTTP stacks hand them over as Latin-1 strings. */
function headerBytes(v: string): Uint8Array {
  const b = new Uint8Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c > 0xff) return encoder.encode(v); // not from the wire: a string already
    b[i] = c;
  }
  return b;
}

/** A URL path with its %XX escapes decoded to bytes, as Go's URL.Path holds it. */
function percentDecode(path: string): Uint8Array {
  const raw = encoder.encode(path);
  const out = new Uint8Array(raw.length);
  let n = 0;
  const hex = (c: number) => (c >= 48 && c <= 57 ? c - 48 : c >= 65 && c <= 70 ? c - 55 : c >= 97 && c <= 102 ? c - 87 : -1);
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] === 37 && i + 2 < raw.length && hex(raw[i + 1]!) >= 0 && hex(raw[i + 2]!) >= 0) {
      out[n++] = hex(raw[i + 1]!) * 16 + hex(raw[i + 2]!);
      i += 2;
    } else out[n++] = raw[i]!;
  }
  return out.slice(0, n);
}

/** The path of a request target (`/a/b?q`, or an absolute URL), without its query. */
function targetPath(target: string): string {
  if (!target.startsWith("/")) {
    try {
      return new URL(target).pathname;
    } catch {
      /* not a URL: use it as it is */
    }
  }
  const q = target.search(/[?#]/);
  return q < 0 ? target : target.slice(0, q);
}

function toBase64(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}

function fromBase64(s: string): Uint8Array {
  const bin = atob(s.replace(/[\r\n]/g, ""));
  const b = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
  return b;
}

function hexOf(b: ArrayBuffer): string {
  return Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * The request's identity under its key: the SHA-256 of
 * `<len(method)>:<method><len(route)>:<route>` and the body, lengths in
 * bytes, in hex; the Go middleware's fingerprint.
 */
async function fingerprint(method: string, route: Uint8Array, body: Uint8Array): Promise<string> {
  const m = encoder.encode(method);
  const parts = [encoder.encode(`${m.length}:`), m, encoder.encode(`${route.length}:`), route, body];
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    all.set(p, o);
    o += p.length;
  }
  return hexOf(await crypto.subtle.digest("SHA-256", all));
}

/** Go's http.CanonicalHeaderKey: "content-type" is "Content-Type". */
function canonicalHeaderKey(h: string): string {
  if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(h)) return h;
  return h.toLowerCase().replace(/(^|-)([a-z])/g, (_, d: string, c: string) => d + c.toUpperCase());
}

// ---- the stored record --------------------------------------------------

/** The result kept under a key, as the Go middleware's JSON: the fingerprint and the response (body in base64). */
interface Stored {
  fingerprint: string;
  status: number;
  header?: Record<string, string[]>;
  body?: string;
}

function encodeStored(fp: string, status: number, header: Record<string, string[]>, body: Uint8Array): Uint8Array {
  // Field order and omitempty as Go's encoding/json writes the struct; map keys sorted.
  const s: Stored = { fingerprint: fp, status };
  const keys = Object.keys(header).sort();
  if (keys.length > 0) s.header = Object.fromEntries(keys.map((k) => [k, header[k]!]));
  if (body.length > 0) s.body = toBase64(body);
  return encoder.encode(goJSON(s));
}

function replay(result: Uint8Array, fp: string): Answer {
  let s: Stored;
  let body: Uint8Array;
  try {
    s = JSON.parse(new TextDecoder().decode(result)) as Stored;
    if (s === null || typeof s !== "object" || typeof s.fingerprint !== "string" || !Number.isInteger(s.status)) {
      throw new Error("not a stored response");
    }
    body = typeof s.body === "string" ? fromBase64(s.body) : new Uint8Array(0);
  } catch (err) {
    return problem(
      500,
      "IDEMPOTENCY_RECORD_UNREADABLE",
      "the response stored under this key cannot be read: " + (err instanceof Error ? err.message : String(err)),
    );
  }
  if (s.fingerprint !== fp) {
    return problem(
      422,
      "IDEMPOTENCY_KEY_REUSED",
      "this key was used with another request (method, route or body); use a new key for a new request",
    );
  }
  const headers: Array<[string, string]> = [];
  for (const [k, vs] of Object.entries(s.header ?? {})) {
    if (Array.isArray(vs)) for (const v of vs) headers.push([k, String(v)]);
  }
  headers.push([REPLAYED_HEADER, "true"]);
  return { status: s.status, headers, body };
}

// ---- the flow both adapters share --------------------------------------

type Check = { pass: true } | { answer: Answer } | { key: string };

/** The checks before the body is read: the method, the header. */
function precheck(s: Settings, method: string, value: string | undefined): Check {
  if (!s.methods.includes(method)) return { pass: true };
  if (!value) {
    if (!s.required) return { pass: true };
    return {
      answer: problem(
        400,
        "IDEMPOTENCY_KEY_REQUIRED",
        `this route requires an ${s.header} header: a unique value per operation, like a UUID, sent again unchanged on every retry`,
      ),
    };
  }
  const b = headerBytes(value);
  let key: string | undefined;
  if (b.length <= 256) {
    try {
      key = fatalUTF8.decode(b);
    } catch {
      /* not UTF-8 */
    }
  }
  if (key === undefined) {
    return {
      answer: problem(400, "IDEMPOTENCY_KEY_INVALID", `the ${s.header} header must be 1 to 256 bytes of UTF-8, got ${b.length} bytes`),
    };
  }
  return { key };
}

/** What the handler answered, as the middleware needs it. */
interface Captured {
  status: number;
  /** The values of a response header. */
  values(name: string): string[];
  body: Uint8Array;
}

/** A claim held while the handler runs: extends its lease, then stores the answer or releases the key. */
class Run {
  private timer: ReturnType<typeof setInterval>;
  private done = false;

  constructor(
    private readonly client: IdempotencyClient,
    private readonly s: Settings,
    private readonly token: string,
    private readonly fp: string,
  ) {
    this.timer = setInterval(() => {
      this.client.extendEffectLease(token, s.leaseMs).catch(() => {});
    }, Math.max(s.leaseMs / 3, 10));
  }

  private stop(): boolean {
    if (this.done) return false;
    this.done = true;
    clearInterval(this.timer);
    return true;
  }

  private async release(): Promise<void> {
    try {
      await this.client.releaseEffect(this.token);
    } catch {
      // The claim's lease ends by itself.
    }
  }

  /** The handler threw: release the key so a retry runs it. */
  async abandon(): Promise<void> {
    if (this.stop()) await this.release();
  }

  /**
   * The handler outlived timeoutMs: release the key and return the answer
   * that says so; null when the handler has answered meanwhile.
   */
  async timeout(): Promise<Answer | null> {
    if (!this.stop()) return null;
    await this.release();
    return timedOut();
  }

  /**
   * The handler answered: store the answer (2xx, 3xx, 4xx) or release the
   * key (5xx, or a body over maxBodyBytes). Returns the answer to send in
   * its place when it could not be stored, null to send it, or "late" when
   * the run already ended (timed out).
   */
  async finish(c: Captured): Promise<Answer | null | "late"> {
    if (!this.stop()) return "late";
    if (c.status >= 500 || c.body.length > this.s.maxBodyBytes) {
      await this.release();
      return null;
    }
    const header: Record<string, string[]> = {};
    for (const h of this.s.replayHeaders) {
      const vs = c.values(h);
      if (vs.length > 0) header[canonicalHeaderKey(h)] = vs;
    }
    try {
      await this.client.completeEffect(this.token, encodeStored(this.fp, c.status, header, c.body));
    } catch (err) {
      // The answer was not stored: a retry runs the handler again once the
      // lease ends. Say so rather than pretend.
      await this.release();
      return unavailable(err);
    }
    return null;
  }
}

/** Claims the key: an answer to send (409, a replay, 422, 503), or a run of the handler. */
async function claim(client: IdempotencyClient, s: Settings, key: string, fp: string): Promise<{ answer: Answer } | { run: Run }> {
  let c;
  try {
    c = await client.claimEffect({ scope: s.scope, key, ttlMs: s.ttlMs, leaseMs: s.leaseMs });
  } catch (err) {
    return { answer: unavailable(err) };
  }
  switch (c.state) {
    case "in_progress":
      return {
        answer: problem(409, "IDEMPOTENCY_KEY_IN_FLIGHT", "a request with this key is still being processed; retry after it completes"),
      };
    case "completed":
      return { answer: replay(c.result, fp) };
    default:
      return { run: new Run(client, s, c.token, fp) };
  }
}

// ---- Express ------------------------------------------------------------

/** The request of {@link expressIdempotency}: Node's, with what Express and body parsers add. */
export type ExpressRequest = IncomingMessage & { originalUrl?: string; rawBody?: unknown };

/** An Express (4 or 5) middleware, on Node's request and response. */
export type ExpressMiddleware = (req: ExpressRequest, res: ServerResponse, next: (err?: unknown) => void) => void;

/**
 * A body parser's `verify` option that keeps the raw body as `req.rawBody`,
 * for a route whose body is parsed before {@link expressIdempotency} runs:
 * `app.use(express.json({ verify: captureRawBody }))`. Mounted before the
 * body parser, the middleware reads the body itself and needs no help.
 *
 * @param req - the request.
 * @param _res - the response.
 * @param buf - the body as the parser read it.
 */
export function captureRawBody(req: IncomingMessage, _res: ServerResponse, buf: Uint8Array): void {
  (req as ExpressRequest).rawBody = buf;
}

type BodyRead = { body: Uint8Array } | { answer: Answer } | { consumed: true };

/**
 * Reads the request body (up to max + 1 bytes) and puts it back into the
 * request stream, so body parsers and handlers after the middleware read it
 * as if nobody had.
 */
function readExpressBody(req: ExpressRequest, max: number): Promise<BodyRead> {
  const raw = req.rawBody;
  if (raw instanceof Uint8Array) return Promise.resolve(raw.length > max ? { answer: tooLarge(max) } : { body: raw });
  const r = req as ExpressRequest & { _body?: unknown };
  if (req.readableEnded || req.readableFlowing === true || r._body === true) return Promise.resolve({ consumed: true });
  if (req.complete && req.readableLength === 0) return Promise.resolve({ body: new Uint8Array(0) });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (v: BodyRead) => {
      req.off("readable", onReadable);
      req.off("error", onError);
      req.off("close", onClose);
      resolve(v);
    };
    const onReadable = () => {
      // read(n) of exactly what is buffered never triggers 'end', so the
      // body can be put back with unshift once all of it has arrived.
      while (req.readableLength > 0) {
        const c = req.read(req.readableLength) as Buffer | null;
        if (c === null) break;
        chunks.push(c);
        size += c.length;
        if (size > max) {
          finish({ answer: tooLarge(max) });
          req.resume(); // drain the rest, as Node does with a body nobody reads
          return;
        }
      }
      if (req.complete) {
        const body = Buffer.concat(chunks);
        if (body.length > 0) req.unshift(body);
        finish({ body: new Uint8Array(body.buffer, body.byteOffset, body.length) });
      }
    };
    const onError = (err: unknown) => finish({ answer: unreadable(err) });
    const onClose = () => {
      if (!req.complete) finish({ answer: unreadable(new Error("the connection closed before the body was read")) });
    };
    // Start the read before listening: a 'readable' listener added while
    // no read is pending reads once itself, and that read, at the end of an
    // empty body, would end the stream for the parsers after us.
    if (!req.complete && req.readableLength === 0) req.read(0);
    req.on("readable", onReadable);
    req.on("error", onError);
    req.on("close", onClose);
    onReadable();
  });
}

function firstHeader(req: IncomingMessage, name: string): string | undefined {
  const lower = name.toLowerCase();
  const distinct = (req as { headersDistinct?: Record<string, string[] | undefined> }).headersDistinct;
  if (distinct) return distinct[lower]?.[0];
  const v = req.headers[lower];
  return Array.isArray(v) ? v[0] : v;
}

function sendNode(res: ServerResponse, a: Answer): void {
  const grouped = new Map<string, string[]>();
  for (const [k, v] of a.headers) grouped.set(k, [...(grouped.get(k) ?? []), v]);
  for (const [k, vs] of grouped) res.setHeader(k, vs.length === 1 ? vs[0]! : vs);
  res.statusCode = a.status;
  res.end(Buffer.from(a.body.buffer, a.body.byteOffset, a.body.length));
}

function headerValues(v: number | string | string[] | undefined): string[] {
  if (v === undefined) return [];
  return Array.isArray(v) ? v.map(String) : [String(v)];
}

type Callback = (err?: Error | null) => void;

/**
 * Holds the handler's answer on `res` (status, headers, body) until it is
 * stored or the key released, then sends it.
 */
function capture(res: ServerResponse, run: Run, s: Settings): void {
  const orig = { writeHead: res.writeHead, write: res.write, end: res.end, flushHeaders: res.flushHeaders };
  const before = res.getHeaders();
  const chunks: Buffer[] = [];
  let status: number | undefined;
  let ended = false;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const restore = () => {
    Object.assign(res, orig);
    if (timer) clearTimeout(timer);
  };
  const sendInstead = (a: Answer) => {
    // As in Go, the handler's headers go with its answer only; the ones
    // set before it ran stay.
    for (const h of res.getHeaderNames()) res.removeHeader(h);
    for (const [k, v] of Object.entries(before)) if (v !== undefined) res.setHeader(k, v);
    sendNode(res, a);
  };
  const chunk = (c: unknown, enc?: unknown) => {
    if (c === undefined || c === null || typeof c === "function") return;
    chunks.push(typeof c === "string" ? Buffer.from(c, typeof enc === "string" ? (enc as BufferEncoding) : "utf8") : Buffer.from(c as Uint8Array));
  };

  res.writeHead = function (this: ServerResponse, code: number, ...rest: unknown[]) {
    if (status === undefined) {
      status = code;
      let headers = rest[0];
      if (typeof headers === "string") {
        res.statusMessage = headers;
        headers = rest[1];
      }
      if (Array.isArray(headers)) {
        // [k, v, k, v] or [[k, v], ...]
        const flat = headers.flat() as string[];
        for (let i = 0; i + 1 < flat.length; i += 2) res.appendHeader(flat[i]!, flat[i + 1]!);
      } else if (headers && typeof headers === "object") {
        for (const [k, v] of Object.entries(headers)) if (v !== undefined) res.setHeader(k, v as string | string[]);
      }
    }
    return this;
  } as ServerResponse["writeHead"];
  res.write = function (this: ServerResponse, c: unknown, enc?: unknown, cb?: unknown): boolean {
    if (ended) return false;
    status ??= res.statusCode;
    chunk(c, enc);
    const done = (typeof enc === "function" ? enc : cb) as Callback | undefined;
    if (done) queueMicrotask(() => done(null));
    return true;
  } as ServerResponse["write"];
  res.flushHeaders = () => {};
  res.end = function (this: ServerResponse, c?: unknown, enc?: unknown, cb?: unknown) {
    if (ended) return this;
    ended = true;
    chunk(c, enc);
    const done = [c, enc, cb].find((f) => typeof f === "function") as Callback | undefined;
    const body = Buffer.concat(chunks);
    const code = status ?? res.statusCode;
    // An error handler that answers after the handler began writing sets a
    // 5xx status that the held answer does not show: release the key then too.
    const failed = code >= 500 || res.statusCode >= 500;
    void run
      .finish({ status: failed ? Math.max(code, 500) : code, values: (n) => headerValues(res.getHeader(n)), body })
      .then(
        (instead) => {
          if (instead === "late") return; // timed out: the client has its answer
          restore();
          if (instead) return sendInstead(instead);
          res.writeHead(code);
          res.end(body, done);
        },
        (err: unknown) => {
          restore();
          sendInstead(unavailable(err));
        },
      );
    return this;
  } as ServerResponse["end"];

  if (s.timeoutMs > 0) {
    timer = setTimeout(() => {
      void run.timeout().then((a) => {
        if (!a) return; // answered meanwhile
        restore();
        sendInstead(a);
        // The handler's late answer goes nowhere, without errors.
        const drop = function (this: ServerResponse) {
          return this;
        };
        Object.assign(res, { writeHead: drop, setHeader: drop, appendHeader: drop, removeHeader: () => {}, flushHeaders: () => {} });
        res.write = ((...args: unknown[]) => {
          const cb = args.find((f) => typeof f === "function") as Callback | undefined;
          if (cb) queueMicrotask(() => cb(null));
          return true;
        }) as ServerResponse["write"];
        res.end = function (this: ServerResponse, ...args: unknown[]) {
          const cb = args.find((f) => typeof f === "function") as Callback | undefined;
          if (cb) queueMicrotask(() => cb(null));
          return this;
        } as ServerResponse["end"];
      });
    }, s.timeoutMs);
  }
}

/**
 * The Idempotency-Key middleware for Express (4 or 5): guards the routes
 * after it with `client`'s effect keys under `options`.
 *
 * ```ts
 * app.post("/orders", expressIdempotency(client, { scope: "api.orders", required: true }), createOrder);
 * ```
 *
 * Mount it before the body parser (it reads the raw body to fingerprint the
 * request, then hands it on unread), or give the parser `verify:
 * captureRawBody`. The handler's answer is held until it is stored; an error
 * handler's 5xx releases the key like the handler's own.
 *
 * @param client - a connected {@link SeppClient}.
 * @param options - `scope` is required.
 * @throws TypeError when `options.scope` is empty.
 */
export function expressIdempotency(client: IdempotencyClient, options: IdempotencyOptions<ExpressRequest>): ExpressMiddleware {
  const s = settings(options);
  const route = options.route;
  return (req, res, next) => {
    serveExpress(client, s, route, req, res, next).catch(next);
  };
}

async function serveExpress(
  client: IdempotencyClient,
  s: Settings,
  route: ((req: ExpressRequest) => string) | undefined,
  req: ExpressRequest,
  res: ServerResponse,
  next: (err?: unknown) => void,
): Promise<void> {
  const method = req.method ?? "";
  const pre = precheck(s, method, firstHeader(req, s.header));
  if ("pass" in pre) return next();
  if ("answer" in pre) return sendNode(res, pre.answer);
  const read = await readExpressBody(req, s.maxBodyBytes);
  if ("answer" in read) return sendNode(res, read.answer);
  if ("consumed" in read) {
    return next(
      new Error(
        "idempotency: the request body was read before the middleware, so it cannot fingerprint the request: mount it before the body parser, or give the parser verify: captureRawBody",
      ),
    );
  }
  const r = route ? encoder.encode(route(req)) : percentDecode(targetPath(req.originalUrl ?? req.url ?? "/"));
  const fp = await fingerprint(method, r, read.body);
  const c = await claim(client, s, pre.key, fp);
  if ("answer" in c) return sendNode(res, c.answer);
  capture(res, c.run, s);
  next();
}

// ---- fetch-style handlers ----------------------------------------------

function toResponse(a: Answer): Response {
  const headers = new Headers();
  for (const [k, v] of a.headers) headers.append(k, v);
  return new Response(nullBody(a.status) ? null : (a.body as Uint8Array<ArrayBuffer>), { status: a.status, headers });
}

function nullBody(status: number): boolean {
  return status === 101 || status === 103 || status === 204 || status === 205 || status === 304;
}

async function readFetchBody(req: Request, max: number): Promise<{ body: Uint8Array } | { answer: Answer }> {
  if (req.body === null) return { body: new Uint8Array(0) };
  // Read a clone, so the handler gets the request (and its class, such as
  // Next.js's NextRequest) with its body unread.
  const reader = req.clone().body!.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
      if (size > max) {
        void reader.cancel().catch(() => {});
        return { answer: tooLarge(max) };
      }
    }
  } catch (err) {
    return { answer: unreadable(err) };
  }
  const body = new Uint8Array(size);
  let o = 0;
  for (const c of chunks) {
    body.set(c, o);
    o += c.length;
  }
  return { body };
}

/** A signal that aborts when any of signals does (AbortSignal.any, which Node has from 20.3). */
function anySignal(signals: AbortSignal[]): AbortSignal {
  const any = (AbortSignal as { any?: (s: AbortSignal[]) => AbortSignal }).any;
  if (any) return any.call(AbortSignal, signals);
  const ac = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      ac.abort(s.reason);
      break;
    }
    s.addEventListener("abort", () => ac.abort(s.reason), { once: true });
  }
  return ac.signal;
}

/** req with another signal, of req's own class where it can be (Next.js's NextRequest). */
function withSignal<R extends Request>(req: R, signal: AbortSignal): R {
  try {
    return new (req.constructor as new (input: Request, init: RequestInit) => R)(req, { signal });
  } catch {
    return new Request(req, { signal }) as R;
  }
}

function fetchValues(h: Headers, name: string): string[] {
  if (name.toLowerCase() === "set-cookie" && typeof h.getSetCookie === "function") return h.getSetCookie();
  const v = h.get(name);
  return v === null ? [] : [v];
}

/**
 * The Idempotency-Key middleware for fetch-style handlers, `(req: Request)
 * => Response`: Hono (`app.post("/orders", (c) => handler(c.req.raw))`),
 * Next.js route handlers, Bun.serve, Deno.serve. Returns a wrapper that
 * guards a handler with `client`'s effect keys under `options`; further
 * arguments (a route context) are passed on.
 *
 * ```ts
 * const idempotent = fetchIdempotency(client, { scope: "api.orders", required: true });
 * export const POST = idempotent(async (req: Request) => Response.json(await createOrder(await req.json()), { status: 201 }));
 * ```
 *
 * The handler gets the request with its body unread. A handler that throws
 * releases the key and the error is rethrown, unless the request's signal
 * has ended (`timeoutMs`, or the client gone): then the answer is 504 with
 * reason `IDEMPOTENCY_HANDLER_TIMEOUT`, as in Go.
 *
 * @param client - a connected {@link SeppClient}.
 * @param options - `scope` is required.
 * @throws TypeError when `options.scope` is empty.
 */
export function fetchIdempotency(
  client: IdempotencyClient,
  options: IdempotencyOptions<Request>,
): <R extends Request, A extends unknown[]>(
  handler: (req: R, ...args: A) => Response | Promise<Response>,
) => (req: R, ...args: A) => Promise<Response> {
  const s = settings(options);
  const route = options.route;
  return (handler) =>
    async (req, ...args) => {
      const pre = precheck(s, req.method, req.headers.get(s.header) ?? undefined);
      if ("pass" in pre) return handler(req, ...args);
      if ("answer" in pre) return toResponse(pre.answer);
      const read = await readFetchBody(req, s.maxBodyBytes);
      if ("answer" in read) return toResponse(read.answer);
      const r = route ? encoder.encode(route(req)) : percentDecode(new URL(req.url).pathname);
      const fp = await fingerprint(req.method, r, read.body);
      const c = await claim(client, s, pre.key, fp);
      if ("answer" in c) return toResponse(c.answer);
      const run = c.run;
      // With timeoutMs, the handler's request has a signal that also ends
      // then, as a Go handler's context does.
      let signal: AbortSignal = req.signal ?? new AbortController().signal;
      let hreq = req;
      if (s.timeoutMs > 0) {
        signal = anySignal([signal, AbortSignal.timeout(s.timeoutMs)]);
        hreq = withSignal(req, signal);
      }
      let res: Response;
      let body: Uint8Array;
      try {
        res = await handler(hreq, ...args);
        if (typeof res?.arrayBuffer !== "function") throw new TypeError("idempotency: the handler returned no Response");
        body = new Uint8Array(await res.arrayBuffer());
      } catch (err) {
        await run.abandon();
        // It gave up after its signal ended (timeoutMs, or the client
        // gone): nothing was stored, say so.
        if (signal.aborted) return toResponse(timedOut());
        throw err;
      }
      const instead = await run.finish({ status: res.status, values: (n) => fetchValues(res.headers, n), body });
      if (instead && instead !== "late") return toResponse(instead);
      return new Response(nullBody(res.status) ? null : (body as Uint8Array<ArrayBuffer>), {
        status: res.status,
        statusText: res.statusText,
        headers: res.headers,
      });
    };
}
