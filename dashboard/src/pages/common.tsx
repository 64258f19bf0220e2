import { api } from "../api";
import { usePoll, navigate } from "../hooks";

/** The queue names, for the pickers. */
export function useQueueNames(): string[] {
  const p = usePoll(async () => (await (await api()).listQueues()).map((q) => q.name), []);
  return p.data ?? [];
}

/** A queue picker that writes the choice into the hash query. */
export function QueuePicker(props: { page: string; query: URLSearchParams; names: string[]; keep?: string[] }) {
  const current = props.query.get("queue") ?? "";
  const names = current && !props.names.includes(current) ? [current, ...props.names] : props.names;
  return (
    <label>
      Queue
      <select
        name="queue"
        value={current}
        onChange={(e) => {
          const q: Record<string, string | undefined> = {};
          for (const k of props.keep ?? []) q[k] = props.query.get(k) ?? undefined;
          q["queue"] = (e.target as HTMLSelectElement).value;
          navigate(props.page, q);
        }}
      >
        <option value="">— choose —</option>
        {names.map((n) => (
          <option value={n}>{n}</option>
        ))}
      </select>
    </label>
  );
}
