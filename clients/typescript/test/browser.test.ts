// Acceptance 7: the client bundled for the browser (esbuild, through the
// package's "browser" export condition) enqueues through Connect JSON from
// headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// against a real server; the Node client then finds the job. The test page
// is served at the server's own origin by page.route, so the page's calls
// are same-origin and need no CORS.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { build } from "esbuild";
import { chromium, type Browser } from "playwright-core";
import { SeppClient, bytesToText } from "sepp";
import { TestServer, packageDir } from "./server.js";

let server: TestServer;
let browser: Browser;

before(async () => {
  server = await TestServer.start("");
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

/** The page's script: uses the package exactly as a browser app would. */
const appSource = `
import { SeppClient, IdempotencyKeyEmptyError, IdempotencyKeyTooLongError } from "sepp";

window.runSepp = async () => {
  const client = await SeppClient.connect(location.origin);
  const first = await client.enqueue({ queue: "browser", jobType: "signup", payload: "from the page", idempotencyKey: "signup-42", headers: { via: "chromium" } });
  const second = await client.enqueue({ queue: "browser", jobType: "signup", payload: "from the page", idempotencyKey: "signup-42" });
  const batch = await client.enqueueBatch([
    { queue: "browser", jobType: "signup", idempotencyKey: "signup-43" },
    { queue: "browser", jobType: "signup", idempotencyKey: "signup-43" },
  ]);
  let localError = "";
  try { await client.enqueue({ queue: "browser", jobType: "signup", idempotencyKey: "" }); }
  catch (err) { localError = err instanceof IdempotencyKeyEmptyError ? err.reason : String(err); }
  let serverError = "";
  const unchecked = await SeppClient.connect(location.origin, { checkKeys: false });
  try { await unchecked.enqueue({ queue: "browser", jobType: "signup", idempotencyKey: "é".repeat(129) }); }
  catch (err) { serverError = err instanceof IdempotencyKeyTooLongError ? err.reason + " " + err.code : String(err); }
  const look = await client.lookupIdempotencyKey("browser", "signup-42");
  return {
    first: { jobId: first.jobId, deduplicated: first.deduplicated },
    second: { jobId: second.jobId, deduplicated: second.deduplicated },
    batch: batch.map((r) => r.ok && r.ack.deduplicated),
    localError,
    serverError,
    lookup: { found: look.found, jobId: look.jobId, hits: String(look.hits) },
  };
};
`;

test("the browser bundle enqueues through Connect JSON from headless Chromium", async () => {
  const bundle = await build({
    stdin: { contents: appSource, resolveDir: packageDir, sourcefile: "app.mjs", loader: "js" },
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  const js = bundle.outputFiles[0]!.text;
  assert.ok(!js.includes("node:http2"), "the browser bundle has no Node transport");

  const page = await browser.newPage();
  const origin = server.addr;
  await page.route(`${origin}/app/**`, async (route) => {
    const url = new URL(route.request().url());
    if (url.pathname === "/app/app.js") {
      await route.fulfill({ status: 200, contentType: "text/javascript", body: js });
    } else {
      await route.fulfill({ status: 200, contentType: "text/html", body: `<!doctype html><script type="module" src="/app/app.js"></script>` });
    }
  });
  const rpcs: Array<{ path: string; contentType: string | undefined }> = [];
  page.on("request", (req) => {
    const u = new URL(req.url());
    if (u.pathname.startsWith("/sepp.v1.") || u.pathname.startsWith("/grpc.health.v1.")) {
      rpcs.push({ path: u.pathname, contentType: req.headers()["content-type"] });
    }
  });
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${origin}/app/index.html`);
  await page.waitForFunction(() => typeof (window as unknown as { runSepp?: unknown }).runSepp === "function");
  const out = (await page.evaluate(() => (window as unknown as { runSepp: () => Promise<unknown> }).runSepp())) as {
    first: { jobId: string; deduplicated: boolean };
    second: { jobId: string; deduplicated: boolean };
    batch: boolean[];
    localError: string;
    serverError: string;
    lookup: { found: boolean; jobId: string; hits: string };
  };
  await page.close();
  assert.deepEqual(errors, []);

  assert.equal(out.first.deduplicated, false);
  assert.deepEqual(out.second, { jobId: out.first.jobId, deduplicated: true });
  assert.deepEqual(out.batch, [false, true]);
  assert.equal(out.localError, "IDEMPOTENCY_KEY_EMPTY");
  assert.equal(out.serverError, "IDEMPOTENCY_KEY_TOO_LONG 3"); // decoded from the Connect JSON error's ErrorInfo
  assert.deepEqual(out.lookup, { found: true, jobId: out.first.jobId, hits: "1" });
  assert.ok(rpcs.some((r) => r.path === "/sepp.v1.JobService/Enqueue"), JSON.stringify(rpcs));
  assert.ok(rpcs.every((r) => r.contentType === "application/json"), JSON.stringify(rpcs));

  // The Node client sees the job the page enqueued.
  const node = await SeppClient.connect(server.addr);
  const job = await node.getJob(out.first.jobId);
  assert.equal(job.queue, "browser");
  assert.equal(job.jobType, "signup");
  assert.equal(bytesToText(job.payload), "from the page");
  assert.deepEqual(job.headers, { via: "chromium" });
  const again = await node.enqueue({ queue: "browser", jobType: "signup", payload: "from the page", idempotencyKey: "signup-42" });
  assert.deepEqual([again.jobId, again.deduplicated], [out.first.jobId, true]);
});
