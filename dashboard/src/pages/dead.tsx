import { useEffect, useState } from "preact/hooks";
import { NotDeadError } from "sepp/browser";
import { api } from "../api";
import { usePoll } from "../hooks";
import { Confirm, ErrorBox } from "../components";
import { QueuePicker, useQueueNames } from "./common";
import { JobTable, PAGE_SIZE, Pager, usePaging } from "./jobs";
import { navigate } from "../hooks";

type Pending = { op: "requeue" | "purge"; ids?: string[]; all?: boolean };

export function DeadPage(props: { query: URLSearchParams }) {
  const names = useQueueNames();
  const queue = props.query.get("queue") ?? "";
  const paging = usePaging([queue]);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [pending, setPending] = useState<Pending | undefined>();
  const [message, setMessage] = useState<string | undefined>();
  const [actionError, setActionError] = useState<unknown>();
  useEffect(() => setSelected(new Set()), [queue]);
  useEffect(() => {
    if (!queue && names.length > 0) navigate("dead", { queue: names[0] });
  }, [queue, names.length]);
  const poll = usePoll(queue ? async () => (await api()).listJobs({ queue, state: "dead", pageSize: PAGE_SIZE, pageToken: paging.token }) : undefined, [queue, paging.token]);
  const toggle = (id: string) =>
    setSelected((s) => {
      const n = new Set(s);
      if (n.has(id)) n.delete(id);
      else n.add(id);
      return n;
    });
  const run = async (p: Pending) => {
    setPending(undefined);
    setActionError(undefined);
    const done = (n: number) => {
      setMessage(`${p.op === "requeue" ? "Requeued" : "Purged"} ${n} job${n === 1 ? "" : "s"}.`);
      setSelected(new Set());
      poll.refresh();
    };
    try {
      const c = await api();
      const which = p.all ? { queue, all: true } : { queue, jobIds: p.ids ?? [] };
      done(p.op === "requeue" ? await c.requeueDeadJobs(which) : await c.purgeDeadJobs(which));
    } catch (err) {
      // Some ids were no longer dead (another hand got there first): the
      // others were done, and the error names the rest.
      if (err instanceof NotDeadError) done(err.count);
      setActionError(err);
    }
  };
  const jobs = poll.data?.jobs ?? [];
  const ids = [...selected];
  const what = (p: Pending) => (p.all ? `every dead job of ${queue}` : p.ids!.length === 1 ? `job ${p.ids![0]}` : `${p.ids!.length} selected jobs`);
  return (
    <section>
      <h1>Dead letter</h1>
      <div class="filters">
        <QueuePicker page="dead" query={props.query} names={names} />
        <button disabled={ids.length === 0} onClick={() => setPending({ op: "requeue", ids })}>Requeue selected</button>
        <button disabled={ids.length === 0} class="danger" onClick={() => setPending({ op: "purge", ids })}>Purge selected</button>
        <button disabled={jobs.length === 0} onClick={() => setPending({ op: "requeue", all: true })}>Requeue all</button>
        <button disabled={jobs.length === 0} class="danger" onClick={() => setPending({ op: "purge", all: true })}>Purge all</button>
      </div>
      {message && <div class="notice" role="status">{message}</div>}
      <ErrorBox error={actionError} />
      <ErrorBox error={poll.error} />
      {queue && poll.data && (
        <>
          <JobTable
            jobs={jobs}
            select={{ selected, toggle }}
            actions={(j) => (
              <span class="row-actions">
                <button onClick={() => setPending({ op: "requeue", ids: [j.jobId] })}>Requeue</button>
                <button class="danger" onClick={() => setPending({ op: "purge", ids: [j.jobId] })}>Purge</button>
              </span>
            )}
          />
          {jobs.length === 0 && <p class="muted">No dead jobs on {queue}.</p>}
          {jobs.some((j) => j.lastError) && (
            <details open>
              <summary>Last errors</summary>
              <ul class="errors">
                {jobs.filter((j) => j.lastError).map((j) => (
                  <li><span class="mono">{j.jobId}</span>: {j.lastError}</li>
                ))}
              </ul>
            </details>
          )}
          <Pager page={paging.page} nextToken={poll.data.nextPageToken} onPrev={paging.prev} onNext={paging.next} />
        </>
      )}
      {pending && (
        <Confirm
          title={pending.op === "requeue" ? "Requeue dead jobs?" : "Purge dead jobs?"}
          message={pending.op === "requeue" ? `Requeue ${what(pending)}: ${pending.ids?.length === 1 ? "it becomes" : "they become"} available again with attempts reset to 0.` : `Delete ${what(pending)} for good. This cannot be undone.`}
          confirmLabel={pending.op === "requeue" ? "Requeue" : "Purge"}
          danger={pending.op === "purge"}
          onConfirm={() => void run(pending)}
          onCancel={() => setPending(undefined)}
        />
      )}
    </section>
  );
}
