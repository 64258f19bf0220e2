// Display helpers: payloads as pretty JSON, text or hex; dates; states.

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

export function ago(d: Date | undefined, now = Date.now()): string {
  if (!d) return "";
  const s = Math.round((d.getTime() - now) / 1000);
  const a = Math.abs(s);
  const v = a < 60 ? `${a}s` : a < 3600 ? `${Math.round(a / 60)}m` : a < 86400 ? `${Math.round(a / 3600)}h` : `${Math.round(a / 86400)}d`;
  return s <= 0 ? `${v} ago` : `in ${v}`;
}

export const STATES = ["available", "scheduled", "reserved", "completed", "dead", "cancelled"] as const;
export type ListState = (typeof STATES)[number];
