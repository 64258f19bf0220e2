import type { ComponentChildren } from "preact";
import { errText, isAuthError } from "./api";
import { renderBytes } from "./format";
import type { JobState } from "sepp/browser";

export function ErrorBox(props: { error: unknown }) {
  if (!props.error) return null;
  return (
    <div class="error" role="alert">
      {isAuthError(props.error) ? "Unauthenticated: set a token (button at the top right). " : ""}
      {errText(props.error)}
    </div>
  );
}

export function StateBadge(props: { state: JobState | string }) {
  return <span class={`badge state-${props.state}`}>{props.state}</span>;
}

export function Bytes(props: { data: Uint8Array; label?: string }) {
  const r = renderBytes(props.data);
  return (
    <div class="bytes">
      <span class="kind">{r.kind === "empty" ? "" : r.kind}</span>
      <pre class={`bytes-${r.kind}`} data-testid={props.label}>{r.text}</pre>
    </div>
  );
}

export function Field(props: { label: string; children: ComponentChildren }) {
  return (
    <div class="field">
      <dt>{props.label}</dt>
      <dd>{props.children}</dd>
    </div>
  );
}

/** A confirmation dialog: the action runs only on "confirm". */
export function Confirm(props: { title: string; message: ComponentChildren; confirmLabel: string; danger?: boolean; onConfirm: () => void; onCancel: () => void }) {
  return (
    <div class="modal-back">
      <div class="modal" role="dialog" aria-label={props.title}>
        <h2>{props.title}</h2>
        <p>{props.message}</p>
        <div class="actions">
          <button type="button" onClick={props.onCancel}>Cancel</button>
          <button type="button" class={props.danger ? "danger" : "primary"} onClick={props.onConfirm} data-testid="confirm">
            {props.confirmLabel}
          </button>
        </div>
      </div>
    </div>
  );
}

/** A small SVG line chart of the last values (per second rates). */
export function Sparkline(props: { values: number[]; label: string }) {
  const w = 120;
  const h = 32;
  // Fewer than two polls so far: a flat line at zero.
  const vals = props.values.length >= 2 ? props.values : [0, props.values[0] ?? 0];
  const max = Math.max(1e-9, ...vals);
  const step = vals.length > 1 ? w / (vals.length - 1) : w;
  const pts = vals.map((v, i) => `${(i * step).toFixed(1)},${(h - 2 - (v / max) * (h - 4)).toFixed(1)}`).join(" ");
  const last = vals[vals.length - 1] ?? 0;
  return (
    <div class="spark">
      <div class="spark-label">
        {props.label} <b>{last.toFixed(last >= 10 ? 0 : 1)}/s</b>
      </div>
      <svg width={w} height={h} viewBox={`0 0 ${w} ${h}`} aria-hidden="true">
        <polygon points={`0,${h - 1} ${pts} ${((vals.length - 1) * step).toFixed(1)},${h - 1}`} fill="currentColor" fill-opacity="0.12" stroke="none" />
        <line x1="0" y1={h - 1} x2={w} y2={h - 1} stroke="currentColor" stroke-opacity="0.3" stroke-width="1" />
        <polyline points={pts} fill="none" stroke="currentColor" stroke-width="1.5" />
      </svg>
    </div>
  );
}
