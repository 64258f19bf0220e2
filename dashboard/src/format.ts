// Display helpers: payloads as pretty JSON, text or hex; dates and
// durations; states; what holds a job back.
import type { Job } from "sepp/browser";

export type Rendered = { kind: "json" | "text" | "hex" | "empty"; text: string };

/** A payload as pretty JSON if it parses, else text if valid UTF-8, else hex. */
export function renderBytes(b: Uint8Array): Rendered {
  if (b.length === 0) return { kind: "empty", text: "(empty)" };
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(b);
  } catch {
    return { kind: "hex", text: hex(b) };
  }
  try {
    return { kind: "json", text: JSON.stringify(JSON.parse(text), null, 2) };
  } catch {
    return { kind: "text", text };
  }
}

export function hex(b: Uint8Array): string {
  const parts: string[] = [];
  for (let i = 0; i < b.length; i += 16) {
    const row = Array.from(b.subarray(i, i + 16), (x) => x.toString(16).padStart(2, "0")).join(" ");
    parts.push(i.toString(16).padStart(8, "0") + "  " + row);
  }
  return parts.join("\n");
}

export function fmtDate(d: Date | undefined): string {
  if (!d) return "—";
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

/** Whole seconds as the pages show a span of time: 42s, 5m, 3h, 2d. */
function span(seconds: number): string {
  const a = Math.abs(seconds);
  return a < 60 ? `${a}s` : a < 3600 ? `${Math.round(a / 60)}m` : a < 86400 ? `${Math.round(a / 3600)}h` : `${Math.round(a / 86400)}d`;
}

export function ago(d: Date | undefined, now = Date.now()): string {
  if (!d) return "";
  const s = Math.round((d.getTime() - now) / 1000);
  const v = span(s);
  return s <= 0 ? `${v} ago` : `in ${v}`;
}

/** A duration in milliseconds, as `ago` shows spans; under a second in ms (0s when 0). */
export function fmtDuration(ms: number): string {
  if (ms <= 0) return "0s";
  if (ms < 1000) return `${Math.round(ms)}ms`;
  return span(Math.round(ms / 1000));
}

/** A piece of the sentence that says what holds a job back: text, or a job to link to. */
export type HoldPart = string | { job: string };

/**
 * What holds back a job whose run-at has come, as the job page says it
 * ("waiting for job X to end", "concurrency key K at its limit", "rate key
 * K, until T"); undefined when nothing holds it.
 */
export function holdParts(j: Pick<Job, "heldBy" | "followsJobId" | "concurrencyKey" | "rateKey" | "heldUntil">): HoldPart[] | undefined {
  switch (j.heldBy) {
    case "follow_up":
      return j.followsJobId ? ["waiting for job ", { job: j.followsJobId }, " to end"] : ["waiting for the job it follows to end"];
    case "concurrency":
      return [j.concurrencyKey ? `concurrency key ${j.concurrencyKey} at its limit` : "the queue's concurrency limit"];
    case "rate":
      return [(j.rateKey ? `rate key ${j.rateKey}` : "the queue's rate") + (j.heldUntil ? `, until ${fmtDate(j.heldUntil)}` : "")];
  }
  return undefined;
}

/** The held counts of a queue (ListQueues), by hold, as the Queues page labels them. */
export const HOLDS = [
  ["follow_up", "heldFollowUp", "held: follow-up"],
  ["concurrency", "heldConcurrency", "held: concurrency"],
  ["rate", "heldRate", "held: rate"],
] as const;

export const STATES = ["available", "scheduled", "reserved", "completed", "dead", "cancelled"] as const;
export type ListState = (typeof STATES)[number];
