import { useState } from "preact/hooks";
import type { OutboxInfo, QueueInfo, ScheduleInfo } from "sepp/browser";
import { api, fetchMetrics, type Sample, errText } from "../api";
import { usePoll, href } from "../hooks";
import { ErrorBox, Sparkline } from "../components";
import { HOLDS, STATES, ago, fmtDate, fmtDuration } from "../format";

/**
 * Rates per queue, derived client-side between two polls (2 s apart):
 * enqueues (created) and dedup hits from the /metrics counters
 * sepp_enqueues_total{outcome="created"} and sepp_dedup_hits_total, and
 * completions from the change in ListQueues' completed count (the server's
 * completion counter has no queue label). Without /metrics (a token that
 * may not read it) the enqueue rate is the change in the queue's total job
 * count and dedup hits are not shown.
 */
interface Point {
  at: number;
  total: number;
  completed: number;
  created?: number;
  hits?: number;
}
interface Rates {
  enqueue: number[];
  dedup: number[];
  complete: number[];
  metrics: boolean;
}
const HISTORY = 30;
const last = new Map<string, Point>();
const rates = new Map<string, Rates>();

function total(q: QueueInfo): number {
  return Number(q.scheduled + q.available + q.reserved + q.completed + q.dead + q.cancelled);
}

function metricSum(samples: Sample[] | undefined, name: string, queue: string, outcome?: string): number | undefined {
  if (!samples) return undefined;
  let sum = 0;
  for (const s of samples) {
    if (s.name === name && s.labels["queue"] === queue && (outcome === undefined || s.labels["outcome"] === outcome)) sum += s.value;
  }
  return sum;
}

function record(queues: QueueInfo[], samples: Sample[] | undefined, now: number): void {
  for (const q of queues) {
    const p: Point = {
      at: now,
      total: total(q),
      completed: Number(q.completed),
      created: metricSum(samples, "sepp_enqueues_total", q.name, "created"),
      hits: metricSum(samples, "sepp_dedup_hits_total", q.name),
    };
    const prev = last.get(q.name);
    last.set(q.name, p);
    if (!prev) continue;
    const dt = (p.at - prev.at) / 1000;
    if (dt <= 0) continue;
    const r = rates.get(q.name) ?? { enqueue: [], dedup: [], complete: [], metrics: false };
    const per = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? undefined : Math.max(0, (a - b) / dt));
    const enq = per(p.created, prev.created) ?? Math.max(0, (p.total - prev.total) / dt);
    const hit = per(p.hits, prev.hits);
    r.metrics = hit !== undefined;
    r.enqueue = [...r.enqueue, enq].slice(-HISTORY);
    r.dedup = [...r.dedup, hit ?? 0].slice(-HISTORY);
    r.complete = [...r.complete, Math.max(0, (p.completed - prev.completed) / dt)].slice(-HISTORY);
    rates.set(q.name, r);
  }
}

export function QueuesPage() {
  const [busy, setBusy] = useState<string | undefined>();
  const [actionError, setActionError] = useState<unknown>();
  const poll = usePoll(async () => {
    const c = await api();
    const [queues, outboxes, schedules, samples] = await Promise.all([c.listQueues(), c.listOutboxes(), c.listSchedules(), fetchMetrics()]);
    record(queues, samples, Date.now());
    return { queues, outboxes, schedules };
  }, []);

  const toggle = async (q: QueueInfo) => {
    setBusy(q.name);
    setActionError(undefined);
    try {
      const c = await api();
      if (q.paused) await c.resumeQueue(q.name);
      else await c.pauseQueue(q.name);
      poll.refresh();
    } catch (err) {
      setActionError(err);
    } finally {
      setBusy(undefined);
    }
  };

  const queues = poll.data?.queues;
  return (
    <section>
      <h1>Queues</h1>
      <ErrorBox error={poll.error} />
      <ErrorBox error={actionError} />
      {queues && queues.length === 0 && <p class="muted">No queues yet: a queue appears with its first job.</p>}
      <div class="cards">
        {queues?.map((q) => {
          const r = rates.get(q.name);
          return (
            <article class="card queue" data-queue={q.name}>
              <div class="card-head">
                <h2>
                  <a href={href("jobs", { queue: q.name })}>{q.name}</a>
                </h2>
                {q.paused && <span class="badge paused">paused</span>}
                <button class={q.paused ? "primary" : ""} disabled={busy === q.name} onClick={() => void toggle(q)}>
                  {q.paused ? "Resume" : "Pause"}
                </button>
              </div>
              <dl class="counts">
                {STATES.map((s) => (
                  <a class={`count state-${s}`} href={href(s === "dead" ? "dead" : "jobs", { queue: q.name, state: s === "dead" ? undefined : s })} data-state={s}>
                    <dt>{s}</dt>
                    <dd>{String(q[s])}</dd>
                  </a>
                ))}
                <a class="count dedup" href={href("keys", { queue: q.name })} data-state="dedup">
                  <dt>dedup records</dt>
                  <dd>{String(q.dedupRecords)}</dd>
                </a>
                {HOLDS.filter(([, field]) => q[field] > 0n).map(([hold, field, label]) => (
                  <a class="count held" href={href("jobs", { queue: q.name, state: "scheduled" })} data-held={hold} title="Jobs whose run-at has come, held back (counted in scheduled)">
                    <dt>{label}</dt>
                    <dd>{String(q[field])}</dd>
                  </a>
                ))}
              </dl>
              <div class="sparks">
                <Sparkline label="enqueue" values={r?.enqueue ?? []} />
                {(r?.metrics ?? true) && <Sparkline label="dedup hit" values={r?.dedup ?? []} />}
                <Sparkline label="complete" values={r?.complete ?? []} />
              </div>
            </article>
          );
        })}
      </div>
      <Outboxes outboxes={poll.data?.outboxes ?? []} />
      <Schedules schedules={poll.data?.schedules ?? []} />
      {poll.loading && !queues && !poll.error && <p class="muted">Loading…</p>}
      <p class="muted small">Refreshes every 2 s. Rates are per second over the last {HISTORY} polls.{poll.error ? " Last error: " + errText(poll.error) : ""}</p>
    </section>
  );
}

/**
 * The [[outboxes]] the server relays (ListOutboxes), a card each: its lag,
 * the rows it relayed and moved to the dead table since the server started,
 * when the relay last read the table, and the last pass's error. Nothing
 * when the server has none.
 */
function Outboxes(props: { outboxes: OutboxInfo[] }) {
  if (props.outboxes.length === 0) return null;
  return (
    <div class="outboxes">
      <h2>Outboxes</h2>
      <div class="cards">
        {props.outboxes.map((o) => (
          <article class={`card outbox${o.lastError ? " failing" : ""}`} data-outbox={o.name}>
            <div class="card-head">
              <h2>{o.name}</h2>
              <span class="badge" data-testid="outbox-dialect">{o.dialect}</span>
            </div>
            <div class="outbox-table muted small mono" data-testid="outbox-table">{o.table}</div>
            <dl class="counts">
              <div class="count lag" data-field="lag" title={`Age of the oldest row not yet relayed: ${o.lagMs} ms`}>
                <dt>lag</dt>
                <dd>{fmtDuration(o.lagMs)}</dd>
              </div>
              <div class="count" data-field="relayed" title="Rows relayed into jobs since the server started">
                <dt>relayed</dt>
                <dd>{String(o.relayed)}</dd>
              </div>
              <div class="count state-dead" data-field="dead" title={`Rows refused for good, moved to ${o.table}_dead, since the server started`}>
                <dt>dead</dt>
                <dd>{String(o.dead)}</dd>
              </div>
            </dl>
            {o.lastError && (
              <div class="error" data-testid="outbox-error">
                {o.lastError}
              </div>
            )}
            <div class="muted small" data-testid="outbox-checked" title={fmtDate(o.checkedAt)}>
              {o.checkedAt ? `checked ${ago(o.checkedAt)}` : "not read yet"}
            </div>
          </article>
        ))}
      </div>
    </div>
  );
}

/**
 * The [[schedules]] the server fires (ListSchedules), a card each: its cron
 * and zone, its queue and catch_up, the latest tick whose job exists (made
 * by any node), the next tick, and this node's last error. Nothing when the
 * server has none.
 */
function Schedules(props: { schedules: ScheduleInfo[] }) {
  if (props.schedules.length === 0) return null;
  return (
    <div class="schedules">
      <h2>Schedules</h2>
      <div class="cards">
        {props.schedules.map((s) => (
          <article class={`card schedule${s.lastError ? " failing" : ""}`} data-schedule={s.name}>
            <div class="card-head">
              <h2>{s.name}</h2>
              <span class="badge" data-testid="schedule-catch-up" title="What is fired of the ticks missed while no node ran">
                catch up: {s.catchUp}
              </span>
            </div>
            <div class="muted small mono" data-testid="schedule-cron">
              {s.cron} ({s.timezone})
            </div>
            <div class="muted small" data-testid="schedule-queue">
              <a href={href("jobs", { queue: s.queue })}>{s.queue}</a> · {s.jobType}
            </div>
            <dl class="ticks">
              <div data-field="last-tick" title={s.lastTick ? fmtDate(s.lastTick) : "No tick has fired yet"}>
                <dt>last tick</dt>
                <dd>{s.lastTick ? ago(s.lastTick) : "none yet"}</dd>
              </div>
              <div data-field="next-tick" title={fmtDate(s.nextTick)}>
                <dt>next tick</dt>
                <dd>{fmtDate(s.nextTick)}</dd>
              </div>
            </dl>
            {s.lastError && (
              <div class="error" data-testid="schedule-error">
                {s.lastError}
              </div>
            )}
          </article>
        ))}
      </div>
    </div>
  );
}
