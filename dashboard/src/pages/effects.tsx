import { useState } from "preact/hooks";
import { api } from "../api";
import { usePoll, navigate } from "../hooks";
import { Bytes, ErrorBox, Field, StateBadge } from "../components";
import { fmtDate, ago } from "../format";

export function EffectsPage(props: { query: URLSearchParams }) {
  const scope = props.query.get("scope") ?? "";
  const key = props.query.get("key") ?? "";
  const [s, setS] = useState(scope);
  const [k, setK] = useState(key);
  const poll = usePoll(scope && key ? async () => (await api()).getEffect(scope, key) : undefined, [scope, key]);
  const e = poll.data;
  return (
    <section>
      <h1>Effects</h1>
      <p class="muted">An effect key records that a side effect (a charge, an email) ran once. Reading it here claims nothing.</p>
      <form
        class="card form"
        onSubmit={(ev) => {
          ev.preventDefault();
          navigate("effects", { scope: s, key: k });
        }}
      >
        <div class="filters">
          <label>
            Scope
            <input name="scope" value={s} onInput={(ev) => setS((ev.target as HTMLInputElement).value)} required />
          </label>
          <label>
            Key
            <input name="key" value={k} onInput={(ev) => setK((ev.target as HTMLInputElement).value)} required />
          </label>
          <button type="submit" class="primary">Look up</button>
        </div>
      </form>
      <ErrorBox error={poll.error} />
      {e && (
        <div class="card" data-testid="effect-result">
          <h2>
            <span class="mono">{key}</span> in {scope}
          </h2>
          {e.found ? (
            <dl class="fields">
              <Field label="State"><StateBadge state={e.state ?? "unknown"} /></Field>
              <Field label="Completed">{fmtDate(e.completedAt)}</Field>
              <Field label="Expires">{fmtDate(e.expiresAt)} ({ago(e.expiresAt)})</Field>
              <Field label="Result"><Bytes data={e.result} label="effect-result-bytes" /></Field>
            </dl>
          ) : (
            <p>Not found: this effect never ran, or its record expired or was released.</p>
          )}
        </div>
      )}
    </section>
  );
}
