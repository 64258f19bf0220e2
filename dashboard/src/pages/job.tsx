import { useState } from "preact/hooks";
import type { Job, KeyLookup } from "sepp/browser";
import { api } from "../api";
import { usePoll, href } from "../hooks";
import { Bytes, Confirm, ErrorBox, Field, StateBadge } from "../components";
import { fmtDate, ago, holdParts } from "../format";

interface JobView {
  job: Job;
  dedup?: KeyLookup;
}

export function Timeline(props: { items: Array<[string, Date | undefined]> }) {
  const items = props.items.filter((i): i is [string, Date] => !!i[1]).sort((a, b) => a[1].getTime() - b[1].getTime());
  return (
    <ol class="timeline">
      {items.map(([label, d]) => (
        <li>
          <span class="when" title={d.toISOString()}>{fmtDate(d)}</span> <span class="what">{label}</span> <span class="muted">({ago(d)})</span>
        </li>
      ))}
    </ol>
  );
}

/** What holds the job back, with a link to the job a follow-up waits for. */
export function HeldBy(props: { job: Job }) {
  const parts = holdParts(props.job);
  if (!parts) return null;
  return (
    <span class="held-by" data-testid="held-by">
      {parts.map((p) => (typeof p === "string" ? p : <a class="mono" href={href(`job/${encodeURIComponent(p.job)}`)}>{p.job}</a>))}
    </span>
  );
}

export function JobPage(props: { id: string }) {
  const poll = usePoll<JobView>(async () => {
    const c = await api();
    const job = await c.getJob(props.id);
    const dedup = job.idempotencyKey ? await c.lookupIdempotencyKey(job.queue, job.idempotencyKey) : undefined;
    return { job, ...(dedup ? { dedup } : {}) };
  }, [props.id]);
  const v = poll.data;
  const j = v?.job;
  const [pending, setPending] = useState<"requeue" | "cancel" | undefined>();
  const [actionError, setActionError] = useState<unknown>();
  const act = async (op: "requeue" | "cancel") => {
    setPending(undefined);
    setActionError(undefined);
    try {
      const c = await api();
      if (op === "requeue") await c.requeueDeadJobs({ queue: j!.queue, jobIds: [j!.jobId] });
      else await c.cancelJob(j!.jobId);
      poll.refresh();
    } catch (err) {
      setActionError(err);
    }
  };
  return (
    <section>
      <h1>
        Job <span class="mono">{props.id}</span>
      </h1>
      <ErrorBox error={poll.error} />
      <ErrorBox error={actionError} />
      {j && (j.state === "dead" || j.state === "available" || j.state === "scheduled") && (
        <div class="filters">
          {j.state === "dead" ? (
            <button onClick={() => setPending("requeue")}>Requeue</button>
          ) : (
            <button class="danger" onClick={() => setPending("cancel")}>Cancel job</button>
          )}
        </div>
      )}
      {pending && (
        <Confirm
          title={pending === "requeue" ? "Requeue this job?" : "Cancel this job?"}
          message={pending === "requeue" ? "It becomes available again with attempts reset to 0." : "It will not run."}
          confirmLabel={pending === "requeue" ? "Requeue" : "Cancel job"}
          danger={pending === "cancel"}
          onConfirm={() => void act(pending)}
          onCancel={() => setPending(undefined)}
        />
      )}
      {j && (
        <>
          <div class="grid2">
            <div class="card">
              <h2>Job</h2>
              <dl class="fields">
                <Field label="State"><StateBadge state={j.state} /></Field>
                {j.heldBy && <Field label="Held back"><HeldBy job={j} /></Field>}
                {j.followsJobId && (
                  <Field label="Follows"><a class="mono" href={href(`job/${encodeURIComponent(j.followsJobId)}`)}>{j.followsJobId}</a></Field>
                )}
                <Field label="Queue"><a href={href("jobs", { queue: j.queue })}>{j.queue}</a></Field>
                <Field label="Type">{j.jobType}</Field>
                <Field label="Idempotency key"><span class="mono">{j.idempotencyKey ?? "—"}</span></Field>
                {j.concurrencyKey && <Field label="Concurrency key"><span class="mono">{j.concurrencyKey}</span></Field>}
                {j.rateKey && <Field label="Rate key"><span class="mono">{j.rateKey}</span></Field>}
                <Field label="Priority">{j.priority}</Field>
                <Field label="Attempts">{j.attempts} of {j.maxAttempts || "∞"}</Field>
                <Field label="Created">{fmtDate(j.createdAt)}</Field>
                <Field label="Run at">{fmtDate(j.runAt)}</Field>
                <Field label="Finalized">{fmtDate(j.finalizedAt)}</Field>
              </dl>
            </div>
            <div class="card">
              <h2>Timeline</h2>
              <Timeline
                items={[
                  ["created", j.createdAt],
                  [j.state === "scheduled" ? "runs (run_at)" : "run_at", j.runAt],
                  ["held until (rate)", j.heldUntil],
                  [`finalized (${j.state})`, j.finalizedAt],
                  ["dedup record expires", v?.dedup?.found ? v.dedup.expiresAt : undefined],
                ]}
              />
            </div>
          </div>
          <div class="card">
            <h2>Payload</h2>
            <Bytes data={j.payload} label="payload" />
          </div>
          {Object.keys(j.headers).length > 0 && (
            <div class="card">
              <h2>Headers</h2>
              <dl class="fields">
                {Object.entries(j.headers).sort().map(([k, val]) => (
                  <Field label={k}><span class="mono">{val}</span></Field>
                ))}
              </dl>
            </div>
          )}
          {j.lastError && (
            <div class="card">
              <h2>Last error</h2>
              <pre class="error-text">{j.lastError}</pre>
            </div>
          )}
          {j.result.length > 0 && (
            <div class="card">
              <h2>Result</h2>
              <Bytes data={j.result} label="result" />
            </div>
          )}
          {j.idempotencyKey && (
            <div class="card" data-testid="dedup">
              <h2>Dedup record</h2>
              {v?.dedup?.found ? (
                <dl class="fields">
                  <Field label="Key"><a class="mono" href={href("keys", { queue: j.queue, key: j.idempotencyKey })}>{j.idempotencyKey}</a></Field>
                  <Field label="Job">{v.dedup.jobId === j.jobId ? "this job" : <a href={href(`job/${v.dedup.jobId}`)}>{v.dedup.jobId}</a>}</Field>
                  <Field label="Hits">{String(v.dedup.hits)}</Field>
                  <Field label="First enqueued">{fmtDate(v.dedup.firstEnqueuedAt)}</Field>
                  <Field label="Expires">{fmtDate(v.dedup.expiresAt)} ({ago(v.dedup.expiresAt)})</Field>
                </dl>
              ) : (
                <p class="muted">No live dedup record for this key (expired or released).</p>
              )}
            </div>
          )}
        </>
      )}
    </section>
  );
}
