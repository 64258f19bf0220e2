import { useEffect, useRef, useState, useCallback } from "preact/hooks";
import { authNeeded, isAuthError } from "./api";

export const POLL_MS = 2000;

export interface Poll<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  refresh: () => void;
}

/**
 * Runs `load` now and every 2 s while the component is mounted (and again
 * whenever `deps` change), keeping the last answer on screen between polls.
 * A call refused for want of a token opens the token dialog.
 */
export function usePoll<T>(load: (() => Promise<T>) | undefined, deps: unknown[]): Poll<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const gen = useRef(0);
  const refresh = useCallback(() => setTick((t) => t + 1), []);
  useEffect(() => {
    setData(undefined);
    setError(undefined);
  }, deps);
  useEffect(() => {
    if (!load) {
      setLoading(false);
      return;
    }
    const my = ++gen.current;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const run = async () => {
      try {
        const v = await load();
        if (stopped || my !== gen.current) return;
        setData(v);
        setError(undefined);
      } catch (err) {
        if (stopped || my !== gen.current) return;
        setError(err);
        if (isAuthError(err)) authNeeded();
      } finally {
        if (!stopped && my === gen.current) {
          setLoading(false);
          timer = setTimeout(run, POLL_MS);
        }
      }
    };
    setLoading(true);
    void run();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }, [...deps, tick]);
  return { data, error, loading, refresh };
}

/** The hash route: "#/jobs?queue=a" → { path: ["jobs"], query }. */
export interface Route {
  path: string[];
  query: URLSearchParams;
}

function parseHash(): Route {
  const h = location.hash.replace(/^#\/?/, "");
  const [p, q] = h.split("?", 2) as [string, string | undefined];
  return { path: p.split("/").filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(q ?? "") };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(parseHash);
  useEffect(() => {
    const f = () => setRoute(parseHash());
    addEventListener("hashchange", f);
    return () => removeEventListener("hashchange", f);
  }, []);
  return route;
}

/** A hash link to path with query (empty values left out). */
export function href(path: string, query: Record<string, string | undefined> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v) q.set(k, v);
  const s = q.toString();
  return `#/${path}${s ? "?" + s : ""}`;
}

export function navigate(path: string, query: Record<string, string | undefined> = {}): void {
  location.hash = href(path, query);
}
