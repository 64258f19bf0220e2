import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { onAuthNeeded, setToken, getToken } from "./api";
import { useRoute, href } from "./hooks";
import { QueuesPage } from "./pages/queues";
import { JobsPage } from "./pages/jobs";
import { JobPage } from "./pages/job";
import { KeysPage } from "./pages/keys";
import { DeadPage } from "./pages/dead";
import { EffectsPage } from "./pages/effects";
import "./style.css";

const NAV: Array<[string, string]> = [
  ["queues", "Queues"],
  ["jobs", "Jobs"],
  ["keys", "Key search"],
  ["dead", "Dead letter"],
  ["effects", "Effects"],
];

function TokenDialog(props: { onDone: () => void; onCancel: () => void }) {
  const [value, setValue] = useState(getToken() ?? "");
  return (
    <div class="modal-back">
      <form
        class="modal"
        role="dialog"
        aria-label="Token"
        onSubmit={(e) => {
          e.preventDefault();
          setToken(value.trim() || undefined);
          props.onDone();
        }}
      >
        <h2>Token</h2>
        <p>This server has <code>[auth]</code> on. Paste a token (kept in this tab's session storage only, sent as <code>Authorization: Bearer</code>).</p>
        <input type="password" name="token" autoFocus value={value} onInput={(e) => setValue((e.target as HTMLInputElement).value)} />
        <div class="actions">
          <button type="button" onClick={props.onCancel}>Cancel</button>
          <button type="submit" class="primary">Use token</button>
        </div>
      </form>
    </div>
  );
}

function App() {
  const route = useRoute();
  const [asking, setAsking] = useState(false);
  const [epoch, setEpoch] = useState(0);
  // Asked once: after Cancel, only the Token button opens the dialog again
  // (the failing polls would reopen it every 2 s).
  const [dismissed, setDismissed] = useState(false);
  useEffect(() => onAuthNeeded(() => !dismissed && setAsking(true)), [dismissed]);
  const page = route.path[0] ?? "queues";
  let body;
  switch (page) {
    case "jobs":
      body = <JobsPage query={route.query} />;
      break;
    case "job":
      body = <JobPage id={route.path[1] ?? ""} />;
      break;
    case "keys":
      body = <KeysPage query={route.query} />;
      break;
    case "dead":
      body = <DeadPage query={route.query} />;
      break;
    case "effects":
      body = <EffectsPage query={route.query} />;
      break;
    default:
      body = <QueuesPage />;
  }
  return (
    <>
      <header>
        <a class="brand" href={href("queues")}>Sepp</a>
        <nav>
          {NAV.map(([p, label]) => (
            <a href={href(p)} class={page === p || (p === "jobs" && page === "job") ? "active" : ""}>{label}</a>
          ))}
        </nav>
        <button class="token-btn" onClick={() => setAsking(true)} title="Set the bearer token">{getToken() ? "Token ✓" : "Token"}</button>
      </header>
      <main key={epoch}>{body}</main>
      {asking && (
        <TokenDialog
          onDone={() => {
            setAsking(false);
            setDismissed(false);
            setEpoch((e) => e + 1);
          }}
          onCancel={() => {
            setAsking(false);
            setDismissed(true);
          }}
        />
      )}
    </>
  );
}

render(<App />, document.getElementById("app")!);
