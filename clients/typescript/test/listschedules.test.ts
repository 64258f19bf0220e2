// listSchedules against a real server running [[schedules]]: each schedule
// in config order, as configured, with its next tick, and once a tick has
// fired, its last tick and the job that tick made, keyed by the tick.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SeppClient } from "sepp";
import { TestServer, waitFor } from "./server.js";

test("listSchedules lists each schedule with its last and next tick", async () => {
  const server = await TestServer.start(`
[[schedules]]
name = "beat"
cron = "@every 1s"
queue = "beats"
job_type = "beat"
catch_up = "none"

[[schedules]]
name = "nightly-report"
cron = "0 3 * * *"
timezone = "Europe/Berlin"
queue = "reports"
job_type = "report.nightly"
`);
  const client = await SeppClient.connect(server.addr);
  try {
    await waitFor("the first tick's job", async () => (await client.listSchedules())[0]?.lastTick !== undefined);
    const [beat, nightly, ...rest] = await client.listSchedules();
    assert.deepEqual(rest, []);
    assert.ok(beat && nightly);
    assert.deepEqual(
      { name: beat.name, cron: beat.cron, timezone: beat.timezone, queue: beat.queue, jobType: beat.jobType, catchUp: beat.catchUp, lastError: beat.lastError },
      { name: "beat", cron: "@every 1s", timezone: "UTC", queue: "beats", jobType: "beat", catchUp: "none", lastError: "" },
    );
    assert.ok(beat.lastTick && beat.nextTick && beat.nextTick > beat.lastTick);
    // The tick's job carries the tick in its key (the answering node made it,
    // or another did and this one knows its id).
    const key = `schedule:beat:${beat.lastTick.toISOString().replace(".000Z", "Z")}`;
    const lookup = await client.lookupIdempotencyKey("beats", key);
    assert.equal(lookup.found, true, `no job for ${key}`);

    assert.equal(nightly.name, "nightly-report");
    assert.equal(nightly.timezone, "Europe/Berlin");
    assert.equal(nightly.catchUp, "last", "catch_up defaults to last");
    assert.equal(nightly.lastTick, undefined);
    // 03:00 in Berlin is 01:00 or 02:00 UTC.
    assert.ok(nightly.nextTick && [1, 2].includes(nightly.nextTick.getUTCHours()) && nightly.nextTick.getUTCMinutes() === 0);
  } finally {
    client.close();
    await server.stop();
  }
});
