// The dashboard's one Sepp client (Connect JSON, same origin), and the
// bearer token for a server with [auth]: asked for once, kept in
// sessionStorage, sent as `Authorization: Bearer` by the client.
import { SeppClient } from "sepp/browser";

const TOKEN_KEY = "sepp.dashboard.token";

let client: SeppClient | undefined;

export function getToken(): string | undefined {
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

export function setToken(token: string | undefined): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  client?.close();
  client = undefined;
}

/** The client, made on first use with the stored token. */
export async function api(): Promise<SeppClient> {
  if (!client) {
    const token = getToken();
    client = await SeppClient.connect(location.origin, {
      protocol: "connect-json",
      healthCheck: false,
      ...(token ? { token } : {}),
    });
  }
  return client;
}

/** Whether err means "no or a bad token" (Connect code unauthenticated). */
export function isAuthError(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { code?: number }).code === 16;
}

/** Listeners told when a call needs a token. */
const authListeners = new Set<() => void>();
export function onAuthNeeded(f: () => void): () => void {
  authListeners.add(f);
  return () => authListeners.delete(f);
}
export function authNeeded(): void {
  for (const f of authListeners) f();
}

/** The error's message, for display. */
export function errText(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** Counters from /metrics (Prometheus text), by name and labels. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    if (m[3]) {
      for (const lm of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[lm[1]!] = lm[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
      }
    }
    out.push({ name: m[1]!, labels, value: Number(m[4]) });
  }
  return out;
}

/** Reads /metrics with the token; undefined when it cannot be read. */
export async function fetchMetrics(): Promise<Sample[] | undefined> {
  try {
    const token = getToken();
    const res = await fetch("/metrics", { headers: token ? { Authorization: `Bearer ${token}` } : {} });
    if (!res.ok) return undefined;
    return parseMetrics(await res.text());
  } catch {
    return undefined;
  }
}
