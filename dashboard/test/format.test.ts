// The display rules the pages use: payloads as JSON, text or hex, spans of
// time, what holds a job back, and the /metrics parser behind the rate charts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { renderBytes, hex, holdParts, ago, fmtDuration } from "../src/format.js";
import { parseMetrics } from "../src/api.js";

test("renderBytes: pretty JSON, else UTF-8 text, else hex", () => {
  const enc = new TextEncoder();
  assert.deepEqual(renderBytes(enc.encode('{"a":1,"b":[true]}')), { kind: "json", text: '{\n  "a": 1,\n  "b": [\n    true\n  ]\n}' });
  assert.deepEqual(renderBytes(enc.encode("héllo, not JSON")), { kind: "text", text: "héllo, not JSON" });
  assert.equal(renderBytes(new Uint8Array([0xff, 0xfe, 0x00])).kind, "hex");
  assert.equal(renderBytes(new Uint8Array(0)).kind, "empty");
  assert.equal(hex(new Uint8Array(17).fill(0xab)), "00000000  " + Array(16).fill("ab").join(" ") + "\n00000010  ab");
});

test("fmtDuration shows a duration in ms as ago shows spans, under a second in ms", () => {
  assert.equal(fmtDuration(0), "0s");
  assert.equal(fmtDuration(340), "340ms");
  assert.equal(fmtDuration(1000), "1s");
  assert.equal(fmtDuration(42_400), "42s");
  assert.equal(fmtDuration(605_000), "10m");
  assert.equal(fmtDuration(3 * 3600_000), "3h");
  assert.equal(fmtDuration(2 * 86400_000), "2d");
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(ago(new Date(now - 605_000), now), "10m ago");
  assert.equal(ago(new Date(now + 42_000), now), "in 42s");
});

test("holdParts says what holds a job back, linking the job a follow-up waits for", () => {
  assert.equal(holdParts({}), undefined);
  assert.deepEqual(holdParts({ heldBy: "follow_up", followsJobId: "j-1" }), ["waiting for job ", { job: "j-1" }, " to end"]);
  assert.deepEqual(holdParts({ heldBy: "concurrency", concurrencyKey: '["acct-7"]' }), ['concurrency key ["acct-7"] at its limit']);
  assert.deepEqual(holdParts({ heldBy: "concurrency" }), ["the queue's concurrency limit"]);
  assert.deepEqual(holdParts({ heldBy: "rate", rateKey: '["acct-7"]', heldUntil: new Date("2026-12-01T15:14:49.120Z") }), [
    'rate key ["acct-7"], until 2026-12-01 15:14:49Z',
  ]);
  assert.deepEqual(holdParts({ heldBy: "rate" }), ["the queue's rate"]);
});

test("parseMetrics reads counters with labels", () => {
  const samples = parseMetrics(
    [
      "# HELP sepp_enqueues_total Enqueued jobs.",
      "# TYPE sepp_enqueues_total counter",
      'sepp_enqueues_total{outcome="created",queue="emails"} 42',
      'sepp_dedup_hits_total{queue="a \\"quoted\\" name"} 3',
      "sepp_jobs_reserved_total 7",
      "",
    ].join("\n"),
  );
  assert.deepEqual(samples, [
    { name: "sepp_enqueues_total", labels: { outcome: "created", queue: "emails" }, value: 42 },
    { name: "sepp_dedup_hits_total", labels: { queue: 'a "quoted" name' }, value: 3 },
    { name: "sepp_jobs_reserved_total", labels: {}, value: 7 },
  ]);
});
