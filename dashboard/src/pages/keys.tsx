import { useState } from "preact/hooks";
import { api, errText } from "../api";
import { usePoll, href, navigate } from "../hooks";
import { Bytes, ErrorBox, Field, StateBadge } from "../components";
import { fmtDate, ago } from "../format";
import { useQueueNames } from "./common";

/** "Was this processed?": queue + key (typed, or derived by the server from a payload) → the dedup record and its job. */
export function KeysPage(props: { query: URLSearchParams }) {
  const names = useQueueNames();
  const queue = props.query.get("queue") ?? "";
  const key = props.query.get("key") ?? "";
  const [q, setQ] = useState(queue);
  const [k, setK] = useState(key);
  const [mode, setMode] = useState<"key" | "payload">("key");
  const [payload, setPayload] = useState("");
  const [deriveError, setDeriveError] = useState<string | undefined>();
  const poll = usePoll(
    queue && key
      ? async () => {
          const c = await api();
          const rec = await c.lookupIdempotencyKey(queue, key);
          const job = rec.found && rec.state !== "deleted" ? await c.getJob(rec.jobId).catch(() => undefined) : undefined;
          return { rec, job };
        }
      : undefined,
    [queue, key],
  );
  const submit = async (e: Event) => {
    e.preventDefault();
    setDeriveError(undefined);
    let key = k;
    if (mode === "payload") {
      // The server derives the key from the payload with the queue's
      // key_fields, as an enqueue of it would, and says which key it was.
      try {
        key = (await (await api()).lookupIdempotencyKeyByPayload(q, payload)).idempotencyKey;
        setK(key);
      } catch (err) {
        setDeriveError(errText(err));
        return;
      }
    }
    navigate("keys", { queue: q, key });
  };
  const rec = poll.data?.rec;
  return (
    <section>
      <h1>Key search</h1>
      <p class="muted">Was this processed? Look up a queue's dedup record by idempotency key, or by a payload, from which the server derives the key with the queue's <code>key_fields</code>.</p>
      <form class="card form" onSubmit={submit}>
        <div class="filters">
          <label>
            Queue
            <input name="queue" list="queue-names" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} required />
            <datalist id="queue-names">{names.map((n) => <option value={n} />)}</datalist>
          </label>
          <label class="radio"><input type="radio" name="mode" checked={mode === "key"} onChange={() => setMode("key")} /> by key</label>
          <label class="radio"><input type="radio" name="mode" value="payload" checked={mode === "payload"} onChange={() => setMode("payload")} /> by payload</label>
        </div>
        {mode === "key" ? (
          <label class="wide">
            Idempotency key
            <input name="key" value={k} onInput={(e) => setK((e.target as HTMLInputElement).value)} required />
          </label>
        ) : (
          <label class="wide">
            Payload (JSON; the queue's key_fields derive the key)
            <textarea name="payload" rows={4} value={payload} onInput={(e) => setPayload((e.target as HTMLTextAreaElement).value)} placeholder='{"account": "a-1", "amount": 5}' required />
          </label>
        )}
        <button type="submit" class="primary">Look up</button>
        {deriveError && <div class="error">{deriveError}</div>}
      </form>
      <ErrorBox error={poll.error} />
      {rec && (
        <div class="card" data-testid="key-result">
          <h2>
            <span class="mono">{key}</span> on {queue}
          </h2>
          {rec.found ? (
            <dl class="fields">
              <Field label="Processed?">{rec.state === "completed" ? "yes: completed" : rec.state === "deleted" ? "recorded; the job is gone (retention)" : `recorded; the job is ${rec.state}`}</Field>
              <Field label="Job">{rec.state === "deleted" ? <span class="mono">{rec.jobId}</span> : <a class="mono" href={href(`job/${rec.jobId}`)}>{rec.jobId}</a>}</Field>
              <Field label="State"><StateBadge state={rec.state} /></Field>
              {poll.data?.job && <Field label="Type">{poll.data.job.jobType}</Field>}
              <Field label="Hits">{String(rec.hits)}</Field>
              <Field label="First enqueued">{fmtDate(rec.firstEnqueuedAt)}</Field>
              <Field label="Expires">{fmtDate(rec.expiresAt)} ({ago(rec.expiresAt)})</Field>
              {rec.result.length > 0 && <Field label="Result"><Bytes data={rec.result} /></Field>}
            </dl>
          ) : (
            <p>Not found: no live dedup record for this key (never enqueued, expired or released).</p>
          )}
        </div>
      )}
    </section>
  );
}
