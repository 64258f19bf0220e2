// The Idempotency-Key middleware (sepp/idempotency) through real apps on
// real listeners, against a real Sepp server: Express 5, Express 4, and a
// fetch-style handler under Hono (test/fixtures/idempotency-app.mjs). Each
// case of the Go middleware's tests, for each kind; the stored record byte
// for byte the Go middleware's; and two app processes sharing one key.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { Readable } from "node:stream";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import express from "express";
import { SeppClient } from "sepp";
import { captureRawBody, expressIdempotency, fetchIdempotency, REPLAYED_HEADER } from "sepp/idempotency";
import { TestServer, packageDir } from "./server.js";

type Kind = "express" | "express4" | "fetch";
const KINDS: Kind[] = ["express", "express4", "fetch"];

interface State {
  label: string;
  runs: number;
  fail: boolean;
  throws: boolean;
  gate: Promise<void> | null;
  entered: (() => void) | null;
  delayMs: number;
}
interface App {
  url: string;
  close(): Promise<void>;
}
interface Fixture {
  newState(label?: string): State;
  startApp(kind: Kind, client: SeppClient, options: Record<string, unknown>, state: State): Promise<App>;
}

const appFile = join(packageDir, "test/fixtures/idempotency-app.mjs");
let fixture: Fixture;
let server: TestServer;
let client: SeppClient;
let deadClient: SeppClient;

before(async () => {
  fixture = (await import(pathToFileURL(appFile).href)) as Fixture;
  server = await TestServer.start("");
  client = await SeppClient.connect(server.addr);
  const dead = await TestServer.start("");
  deadClient = await SeppClient.connect(dead.addr, { retries: false });
  await dead.stop();
});
after(async () => {
  client?.close();
  deadClient?.close();
  await server?.stop();
});

interface Answer {
  status: number;
  headers: Headers;
  body: string;
}

async function post(url: string, key: string, body?: string, path = "/orders", method = "POST"): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (key !== "") headers["Idempotency-Key"] = key;
  const res = await fetch(url + path, { method, headers, body });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

function wantProblem(a: Answer, status: number, reason: string): void {
  const p = JSON.parse(a.body) as { status: number; reason: string; title: string; type: string; detail: string };
  assert.equal(a.status, status, a.body);
  assert.equal(a.headers.get("content-type"), "application/problem+json");
  assert.deepEqual([p.status, p.reason, p.type, typeof p.detail], [status, reason, "about:blank", "string"], a.body);
}

/** Runs f with an app of kind, closing it after. */
async function withApp(kind: Kind, options: Record<string, unknown>, state: State, f: (url: string) => Promise<void>): Promise<void> {
  const app = await fixture.startApp(kind, client, options, state);
  try {
    await f(app.url);
  } finally {
    await app.close();
  }
}

let scopes = 0;
/** A scope of the test's own, so the apps of one test never meet another's keys. */
const scope = (name: string) => `api.${name}.${++scopes}`;

/** The bytes of a UTF-8 string as a header value: fetch sends each char of a header string as one byte. */
const rawHeader = (s: string) => Buffer.from(s, "utf8").toString("latin1");

for (const kind of KINDS) {
  test(`${kind}: a repeat is replayed with Idempotent-Replayed; another body 422; no key 400; a bad key 400; GET passes`, async () => {
    const state = fixture.newState();
    const sc = scope("orders");
    await withApp(kind, { scope: sc, required: true }, state, async (url) => {
      const first = await post(url, "order-1", '{"sku":"a"}');
      assert.equal(first.status, 201);
      assert.equal(first.headers.get(REPLAYED_HEADER), null);
      assert.equal(first.headers.get("x-not-stored"), "1");
      const again = await post(url, "order-1", '{"sku":"a"}');
      assert.equal(again.status, 201);
      assert.equal(again.body, first.body);
      assert.equal(again.headers.get(REPLAYED_HEADER), "true");
      assert.equal(again.headers.get("location"), "/orders/1");
      assert.equal(again.headers.get("content-type"), "application/json");
      assert.equal(again.headers.get("x-not-stored"), null, "only the replay headers are stored");
      assert.equal(state.runs, 1);

      wantProblem(await post(url, "order-1", '{"sku":"b"}'), 422, "IDEMPOTENCY_KEY_REUSED");
      wantProblem(await post(url, "order-1", '{"sku":"a"}', "/orders/other"), 422, "IDEMPOTENCY_KEY_REUSED");
      wantProblem(await post(url, "order-1", '{"sku":"a"}', "/orders", "PATCH"), 422, "IDEMPOTENCY_KEY_REUSED");
      wantProblem(await post(url, "", '{"sku":"a"}'), 400, "IDEMPOTENCY_KEY_REQUIRED");
      wantProblem(await post(url, "k".repeat(257), "{}"), 400, "IDEMPOTENCY_KEY_INVALID");
      wantProblem(await post(url, "\xff\xfe", "{}"), 400, "IDEMPOTENCY_KEY_INVALID");
      assert.equal(state.runs, 1);

      // A key of 256 bytes of UTF-8 is the effect key, as the Go middleware takes the header's bytes.
      const long = "é".repeat(128);
      assert.equal((await post(url, rawHeader(long), "{}")).status, 201);
      assert.equal((await client.getEffect(sc, long)).state, "completed");

      const get = await fetch(url + "/orders");
      assert.equal(get.status, 201, "GET passes through");
      assert.equal(state.runs, 3);
    });
  });

  test(`${kind}: a repeat while the first runs gets 409; once it answered, the replay`, async () => {
    let open!: () => void;
    let entered!: () => void;
    const state = fixture.newState();
    state.gate = new Promise((r) => (open = r));
    const started = new Promise<void>((r) => (entered = r));
    state.entered = () => entered();
    await withApp(kind, { scope: scope("inflight"), required: true }, state, async (url) => {
      const first = post(url, "order-2", "{}");
      await started; // the first request holds the key and runs
      wantProblem(await post(url, "order-2", "{}"), 409, "IDEMPOTENCY_KEY_IN_FLIGHT");
      open();
      const a = await first;
      assert.equal(a.status, 201);
      const r = await post(url, "order-2", "{}");
      assert.deepEqual([r.headers.get(REPLAYED_HEADER), r.body], ["true", a.body]);
      assert.equal(state.runs, 1);
    });
  });

  test(`${kind}: a 500 and a thrown error release the key, so the retry runs the handler`, async () => {
    const state = fixture.newState();
    await withApp(kind, { scope: scope("failing"), required: true }, state, async (url) => {
      state.fail = true;
      const failed = await post(url, "order-3", "{}");
      assert.deepEqual([failed.status, failed.body], [500, "database down\n"]);
      state.fail = false;
      state.throws = true;
      const threw = await post(url, "order-3", "{}");
      assert.deepEqual([threw.status, threw.body], [500, "internal error\n"], "the app's error handler answered");
      state.throws = false;
      const r = await post(url, "order-3", "{}");
      assert.deepEqual([r.status, r.headers.get(REPLAYED_HEADER), state.runs], [201, null, 1]);
      assert.equal((await post(url, "order-3", "{}")).headers.get(REPLAYED_HEADER), "true");
    });
  });

  test(`${kind}: a body over maxBodyBytes gets 413; an answer over it is sent, not stored`, async () => {
    const state = fixture.newState();
    await withApp(kind, { scope: scope("sizes"), required: true, maxBodyBytes: 100 }, state, async (url) => {
      wantProblem(await post(url, "big", "x".repeat(101)), 413, "PAYLOAD_TOO_LARGE");
      assert.equal(state.runs, 0);
      const body = "y".repeat(90); // the answer echoes it: over 100 bytes
      const a = await post(url, "echo", body);
      assert.equal(a.status, 201);
      assert.ok(a.body.length > 100 && a.body.includes(body));
      const b = await post(url, "echo", body);
      assert.deepEqual([b.status, b.headers.get(REPLAYED_HEADER), state.runs], [201, null, 2], "not stored: the retry ran");
    });
  });

  test(`${kind}: with Sepp unreachable the handler does not run: 503 with Retry-After`, async () => {
    const state = fixture.newState();
    const app = await fixture.startApp(kind, deadClient, { scope: "api.down", required: true }, state);
    try {
      const r = await post(app.url, "order-5", "{}");
      wantProblem(r, 503, "UNAVAILABLE");
      assert.equal(r.headers.get("retry-after"), "1");
      assert.equal(state.runs, 0);
    } finally {
      await app.close();
    }
  });

  test(`${kind}: the stored record is byte for byte the Go middleware's, and a Go record is replayed`, async () => {
    // What github.com/sepp-dev/sepp/idempotency stored for the same requests
    // and answers (read back with getEffect from a Go app under this
    // middleware's test handler with label "go-").
    const golden = [
      {
        path: "/orders",
        body: '{"sku":"a"}',
        record:
          '{"fingerprint":"31b7242c69bacf74dddcbdb26c4e5fdcba642c24732a08aef6eac415a4338fea","status":201,"header":{"Content-Type":["application/json"],"Location":["/orders/go-1"]},"body":"eyJvcmRlciI6ImdvLTEiLCJyZXF1ZXN0Ijoie1wic2t1XCI6XCJhXCJ9In0="}',
      },
      {
        path: "/orders/a%20b/%C3%A9", // the route is the decoded path, as Go's URL.Path
        body: undefined,
        record:
          '{"fingerprint":"a5c4728c0a29d186109aca9fd946f8c585e79c6f420c6f459597733887c71aab","status":201,"header":{"Content-Type":["application/json"],"Location":["/orders/go-2"]},"body":"eyJvcmRlciI6ImdvLTIiLCJyZXF1ZXN0IjoiIn0="}',
      },
    ];
    const sc = scope("golden");
    await withApp(kind, { scope: sc, required: true }, fixture.newState("go-"), async (url) => {
      for (const [i, g] of golden.entries()) {
        assert.equal((await post(url, `golden-${i}`, g.body, g.path)).status, 201);
        assert.equal(Buffer.from((await client.getEffect(sc, `golden-${i}`)).result).toString(), g.record);
      }
      // A record the Go middleware stored is replayed here.
      const sc2 = scope("fromgo");
      const claim = await client.claimEffect({ scope: sc2, key: "from-go" });
      await client.completeEffect(claim.token, golden[0]!.record);
      const state = fixture.newState();
      await withApp(kind, { scope: sc2 }, state, async (url2) => {
        const r = await post(url2, "from-go", '{"sku":"a"}');
        assert.deepEqual(
          [r.status, r.headers.get(REPLAYED_HEADER), r.headers.get("location"), r.body, state.runs],
          [201, "true", "/orders/go-1", '{"order":"go-1","request":"{\\"sku\\":\\"a\\"}"}', 0],
        );
      });
    });
  });

  test(`${kind}: the lease is extended while the handler outlives it`, async () => {
    const state = fixture.newState();
    state.delayMs = 1500; // two and a half leases
    await withApp(kind, { scope: scope("slow"), required: true, leaseMs: 600 }, state, async (url) => {
      const first = post(url, "slow-1", "{}");
      await new Promise((r) => setTimeout(r, 1000)); // past the first lease
      wantProblem(await post(url, "slow-1", "{}"), 409, "IDEMPOTENCY_KEY_IN_FLIGHT");
      assert.equal((await first).status, 201);
      assert.equal(state.runs, 1);
    });
  });

  test(`${kind}: a handler that has not answered by timeoutMs gets 504 and its key released`, async () => {
    // As the Go middleware's TestTimeoutReleases: the fetch-style handler
    // gives up when its request's signal ends; under Express the middleware
    // answers at the timeout and drops the late answer.
    let open!: () => void;
    const hung = fixture.newState();
    hung.gate = new Promise((r) => (open = r));
    await withApp(kind, { scope: scope("timeout"), timeoutMs: 200 }, hung, async (url) => {
      wantProblem(await post(url, "order-9", '{"a":1}'), 504, "IDEMPOTENCY_HANDLER_TIMEOUT");
      hung.gate = null;
      open();
      await new Promise((r) => setTimeout(r, 100));
      const late = kind === "fetch" ? 0 : 1; // an Express handler still ran to its end
      assert.equal(hung.runs, late);
      const again = await post(url, "order-9", '{"a":1}');
      assert.deepEqual([again.status, again.headers.get(REPLAYED_HEADER), hung.runs], [201, null, late + 1], "the key was released");
      const then = await post(url, "order-9", '{"a":1}');
      assert.deepEqual([then.headers.get(REPLAYED_HEADER), then.body, hung.runs], ["true", again.body, late + 1]);
    });
    if (kind !== "fetch") return;
    // A fetch-style handler that answers 2xx anyway after its signal ended
    // did its work: that answer is stored, as in Go.
    const slow = fixture.newState();
    slow.delayMs = 400;
    await withApp(kind, { scope: scope("timeout"), timeoutMs: 100 }, slow, async (url) => {
      const a = await post(url, "order-10", "{}");
      const b = await post(url, "order-10", "{}");
      assert.deepEqual([a.status, b.status, b.headers.get(REPLAYED_HEADER), b.body, slow.runs], [201, 201, "true", a.body, 1]);
    });
  });
}

for (const kind of ["express", "express4"] as const) {
  test(`${kind}: the body is handed on to the parsers after the middleware: whole, chunked, slow or empty`, async () => {
    const ex = kind === "express" ? express : await loadExpress4();
    const app = ex();
    const idem = expressIdempotency(client, { scope: scope("parsers") });
    app.post("/json", idem, ex.json(), (req, res) => void res.status(201).json(req.body));
    app.post("/raw", idem, ex.raw({ type: () => true, limit: "1mb" }), (req, res) => void res.status(201).send(req.body));
    app.post("/stream", idem, (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      // Answered through a stream piped into res.
      req.on("end", () => void Readable.from([Buffer.concat(chunks)]).pipe(res.status(201).type("application/octet-stream")));
    });
    const srv = app.listen(0, "127.0.0.1");
    await once(srv, "listening");
    const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
    const send = async (path: string, key: string, body: BodyInit) => {
      const r = await fetch(url + path, { method: "POST", headers: { "Idempotency-Key": key }, body, duplex: "half" } as RequestInit);
      return { status: r.status, replayed: r.headers.get(REPLAYED_HEADER), body: Buffer.from(await r.arrayBuffer()) };
    };
    try {
      const j = await fetch(url + "/json", {
        method: "POST",
        headers: { "Idempotency-Key": "j-1", "Content-Type": "application/json" },
        body: '{"a":[1,2]}',
      });
      assert.deepEqual([j.status, await j.json()], [201, { a: [1, 2] }]);
      const big = Buffer.alloc(300_000);
      for (let i = 0; i < big.length; i++) big[i] = i % 251;
      const bodies: Array<[string, Buffer, () => BodyInit]> = [
        // 300 KB in 3 KB chunks (Transfer-Encoding: chunked): more than one read.
        ["chunked", big, () => new ReadableStream<Uint8Array>({
          start(c) {
            for (let o = 0; o < big.length; o += 3000) c.enqueue(big.subarray(o, o + 3000));
            c.close();
          },
        })],
        // Chunks 30 ms apart: the body arrives after the middleware starts reading.
        ["slow", Buffer.from("abcabcabc"), () => {
          let n = 0;
          return new ReadableStream<Uint8Array>({
            async pull(c) {
              await new Promise((r) => setTimeout(r, 30));
              c.enqueue(Buffer.from("abc"));
              if (++n === 3) c.close();
            },
          });
        }],
        ["empty-chunked", Buffer.alloc(0), () => new ReadableStream<Uint8Array>({ start: (c) => c.close() })],
        ["empty", Buffer.alloc(0), () => ""],
      ];
      for (const path of ["/raw", "/stream"]) {
        for (const [name, want, body] of bodies) {
          const first = await send(path, `${path}-${name}`, body());
          const again = await send(path, `${path}-${name}`, body());
          assert.deepEqual([first.status, first.replayed, again.status, again.replayed], [201, null, 201, "true"], `${path} ${name}`);
          assert.ok(first.body.equals(want) && again.body.equals(want), `${path} ${name}: the handler read the whole body`);
        }
      }
    } finally {
      srv.close();
      srv.closeAllConnections();
    }
  });
}

test("express: after a body parser the middleware uses captureRawBody's bytes, and refuses to guess without them", async () => {
  const sc = scope("captured");
  const app = express();
  let runs = 0;
  app.use("/captured", express.json({ verify: captureRawBody }));
  app.use("/plain", express.json());
  const idem = expressIdempotency(client, { scope: sc, route: () => "/orders" });
  const handler = (req: express.Request, res: express.Response) => void res.status(201).json({ run: ++runs, body: req.body });
  app.post("/captured", idem, handler);
  app.post("/plain", idem, handler);
  app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(500).type("text/plain").end(err.message);
  });
  const srv = app.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
  const send = (path: string, body: string) =>
    fetch(url + path, { method: "POST", headers: { "Idempotency-Key": "c-1", "Content-Type": "application/json" }, body });
  try {
    const a = await send("/captured", '{"sku":"a"}');
    const b = await send("/captured", '{"sku":"a"}');
    assert.deepEqual([a.status, b.status, b.headers.get(REPLAYED_HEADER), runs], [201, 201, "true", 1]);
    assert.equal((await send("/captured", '{"sku": "a"}')).status, 422, "the raw bytes are the fingerprint, not the parsed value");
    const c = await fetch(url + "/plain", { method: "POST", headers: { "Idempotency-Key": "c-2", "Content-Type": "application/json" }, body: "{}" });
    assert.equal(c.status, 500);
    assert.match(await c.text(), /mount it before the body parser, or give the parser verify: captureRawBody/);
    assert.equal(runs, 1);
  } finally {
    srv.close();
    srv.closeAllConnections();
  }
});

test("fetch: further arguments reach the handler, methods not guarded pass through, and a scope is required", async () => {
  const idempotent = fetchIdempotency(client, { scope: scope("args") });
  let seen: unknown;
  const handler = idempotent(async (req: Request, ctx: { params: { id: string } }) => {
    seen = ctx.params.id;
    return new Response(await req.text(), { status: 201 });
  });
  const req = () => new Request("http://app.test/orders/9", { method: "POST", headers: { "Idempotency-Key": "a-1" }, body: "hello" });
  const a = await handler(req(), { params: { id: "9" } });
  assert.deepEqual([a.status, await a.text(), seen], [201, "hello", "9"]);
  const b = await handler(req(), { params: { id: "ignored" } });
  assert.deepEqual([b.headers.get(REPLAYED_HEADER), await b.text()], ["true", "hello"]);
  const put = await handler(new Request("http://app.test/orders/9", { method: "PUT", body: "x" }), { params: { id: "p" } });
  assert.deepEqual([put.status, put.headers.get(REPLAYED_HEADER), seen], [201, null, "p"]);
  assert.throws(() => fetchIdempotency(client, { scope: "" }), /scope is required/);
  assert.throws(() => expressIdempotency(client, {} as { scope: string }), /scope is required/);
});

/** Express 4 (the devDependency express4, without types of its own), typed as Express 5: the calls used are the same. */
async function loadExpress4(): Promise<typeof express> {
  const name = "express4";
  return ((await import(name)) as { default: typeof express }).default;
}

/** Starts the fixture app as a process of its own; returns its URL and the process. */
async function appProcess(kind: Kind, sc: string): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(process.execPath, [appFile, server.addr, kind, sc], { cwd: packageDir, stdio: ["ignore", "pipe", "inherit"] });
  const lines = createInterface({ input: proc.stdout! });
  const [url] = (await Promise.race([
    once(lines, "line"),
    once(proc, "exit").then(([code]) => Promise.reject(new Error(`the ${kind} app exited with ${code}`))),
  ])) as [string];
  return { url, proc };
}

for (const [k1, k2] of [
  ["express", "express"],
  ["fetch", "fetch"],
  ["express", "fetch"],
] as Array<[Kind, Kind]>) {
  test(`two app processes (${k1}, ${k2}) sharing one key run the handler once`, async () => {
    const sc = scope("procs");
    const apps = await Promise.all([appProcess(k1, sc), appProcess(k2, sc)]);
    try {
      // 16 concurrent tries of one request, alternating between the two apps.
      const answers = await Promise.all(
        Array.from({ length: 16 }, (_, i) => post(apps[i % 2]!.url, "order-4", '{"sku":"x"}')),
      );
      const bodies = new Set<string>();
      for (const a of answers) {
        if (a.status === 201) bodies.add(a.body);
        else wantProblem(a, 409, "IDEMPOTENCY_KEY_IN_FLIGHT");
      }
      const runs = await Promise.all(apps.map(async (a) => Number(await (await fetch(a.url + "/runs")).text())));
      assert.equal(runs[0]! + runs[1]!, 1, `runs per process: ${runs}`);
      assert.equal(bodies.size <= 1, true, [...bodies].join("\n"));
      // Once it has answered, both replay its answer.
      const later = await Promise.all(apps.map((a) => post(a.url, "order-4", '{"sku":"x"}')));
      const created = [...bodies][0] ?? later[0]!.body;
      for (const a of later) assert.deepEqual([a.status, a.headers.get(REPLAYED_HEADER), a.body], [201, "true", created]);
    } finally {
      for (const a of apps) a.proc.kill("SIGKILL");
    }
  });
}
