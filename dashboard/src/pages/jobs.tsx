import { useEffect, useState } from "preact/hooks";
import type { Job, JobState } from "sepp/browser";
import { api } from "../api";
import { usePoll, href, navigate } from "../hooks";
import { ErrorBox, StateBadge } from "../components";
import { STATES, fmtDate, ago } from "../format";
import { QueuePicker, useQueueNames } from "./common";

export const PAGE_SIZE = 50;

/** The jobs table, shared with the dead-letter page. */
export function JobTable(props: { jobs: Job[]; select?: { selected: Set<string>; toggle: (id: string) => void }; actions?: (j: Job) => preact.ComponentChildren }) {
  return (
    <div class="table-wrap">
      <table class="jobs">
        <thead>
          <tr>
            {props.select && <th></th>}
            <th>Job</th>
            <th>Type</th>
            <th>State</th>
            <th>Key</th>
            <th>Attempts</th>
            <th>Created</th>
            <th>Run at</th>
            {props.actions && <th></th>}
          </tr>
        </thead>
        <tbody>
          {props.jobs.map((j) => (
            <tr data-job={j.jobId}>
              {props.select && (
                <td>
                  <input type="checkbox" aria-label={`select ${j.jobId}`} checked={props.select.selected.has(j.jobId)} onChange={() => props.select!.toggle(j.jobId)} />
                </td>
              )}
              <td class="mono">
                <a href={href(`job/${encodeURIComponent(j.jobId)}`)}>{j.jobId}</a>
              </td>
              <td>{j.jobType}</td>
              <td>
                <StateBadge state={j.state} />
                {j.heldBy && (
                  <>
                    {" "}
                    <span class="badge held" title={`held back: ${j.heldBy.replace("_", "-")}`}>held</span>
                  </>
                )}
              </td>
              <td class="mono key">{j.idempotencyKey ?? ""}</td>
              <td>
                {j.attempts}/{j.maxAttempts || "∞"}
              </td>
              <td title={fmtDate(j.createdAt)}>{ago(j.createdAt)}</td>
              <td title={fmtDate(j.runAt)}>{ago(j.runAt)}</td>
              {props.actions && <td>{props.actions(j)}</td>}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Page tokens of the pages seen so far: [""] is the first page. */
export function usePaging(resetOn: unknown[]) {
  const [tokens, setTokens] = useState<string[]>([""]);
  useEffect(() => setTokens([""]), resetOn);
  return {
    token: tokens[tokens.length - 1]!,
    page: tokens.length,
    next: (t: string) => setTokens((ts) => [...ts, t]),
    prev: () => setTokens((ts) => (ts.length > 1 ? ts.slice(0, -1) : ts)),
  };
}

export function Pager(props: { page: number; nextToken: string | undefined; onPrev: () => void; onNext: (t: string) => void }) {
  return (
    <div class="pager">
      <button disabled={props.page <= 1} onClick={props.onPrev}>← Previous</button>
      <span>Page {props.page}</span>
      <button disabled={!props.nextToken} onClick={() => props.nextToken && props.onNext(props.nextToken)}>Next →</button>
    </div>
  );
}

export function JobsPage(props: { query: URLSearchParams }) {
  const names = useQueueNames();
  const queue = props.query.get("queue") ?? "";
  const state = (props.query.get("state") ?? "") as JobState | "";
  const [jobType, setJobType] = useState(props.query.get("type") ?? "");
  const [prefix, setPrefix] = useState(props.query.get("prefix") ?? "");
  const paging = usePaging([queue, state]);
  const poll = usePoll(
    queue ? async () => (await api()).listJobs({ queue, ...(state ? { state } : {}), pageSize: PAGE_SIZE, pageToken: paging.token }) : undefined,
    [queue, state, paging.token],
  );
  useEffect(() => {
    if (!queue && names.length > 0) navigate("jobs", { queue: names[0], state: state || undefined });
  }, [queue, names.length]);
  const jobs = (poll.data?.jobs ?? []).filter(
    (j) => (!jobType || j.jobType.includes(jobType)) && (!prefix || (j.idempotencyKey ?? "").startsWith(prefix)),
  );
  const setQ = (k: string, v: string) => {
    const q: Record<string, string | undefined> = { queue, state: state || undefined, type: jobType || undefined, prefix: prefix || undefined };
    q[k] = v || undefined;
    history.replaceState(null, "", href("jobs", q));
  };
  return (
    <section>
      <h1>Jobs</h1>
      <div class="filters">
        <QueuePicker page="jobs" query={props.query} names={names} keep={["state"]} />
        <label>
          State
          <select name="state" value={state} onChange={(e) => navigate("jobs", { queue, state: (e.target as HTMLSelectElement).value })}>
            <option value="">all</option>
            {STATES.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Job type
          <input name="type" value={jobType} placeholder="contains…" onInput={(e) => { const v = (e.target as HTMLInputElement).value; setJobType(v); setQ("type", v); }} />
        </label>
        <label>
          Key prefix
          <input name="prefix" value={prefix} placeholder="starts with…" onInput={(e) => { const v = (e.target as HTMLInputElement).value; setPrefix(v); setQ("prefix", v); }} />
        </label>
      </div>
      <p class="muted small">Job type and key prefix filter the page shown ({PAGE_SIZE} jobs), in the browser: ListJobs has no such filters.</p>
      <ErrorBox error={poll.error} />
      {!queue && <p class="muted">Choose a queue.</p>}
      {queue && poll.data && (
        <>
          <JobTable jobs={jobs} />
          {jobs.length === 0 && <p class="muted">No jobs{state ? ` in state ${state}` : ""} on this page.</p>}
          <Pager page={paging.page} nextToken={poll.data.nextPageToken} onPrev={paging.prev} onNext={paging.next} />
        </>
      )}
    </section>
  );
}
