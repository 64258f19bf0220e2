// The package's modules form layers without cycles: the batcher is handed a
// send function and knows nothing of the client; the effect and worker
// modules depend on the client, never the reverse. Read from the sources'
// own imports (type imports too: a cycle of types is still a cycle).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { packageDir } from "./server.js";

const src = join(packageDir, "src");

/** Each module of src/ (not the generated code) with the modules of src/ it imports. */
function imports(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of readdirSync(src).filter((f) => f.endsWith(".ts"))) {
    const text = readFileSync(join(src, file), "utf8");
    const deps = [...text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+"\.\/([\w-]+)\.js"/gms)].map((m) => `${m[1]}.ts`);
    graph.set(file, [...new Set(deps)]);
  }
  return graph;
}

/** Every module `from` reaches through its imports. */
function reach(graph: Map<string, string[]>, from: string): Set<string> {
  const seen = new Set<string>();
  const walk = (m: string) => {
    for (const d of graph.get(m) ?? []) {
      if (!seen.has(d)) {
        seen.add(d);
        walk(d);
      }
    }
  };
  walk(from);
  return seen;
}

test("the imports are read: client.ts imports the batcher and errors", () => {
  const deps = imports().get("client.ts") ?? [];
  assert.ok(deps.includes("batcher.ts") && deps.includes("errors.ts"), JSON.stringify(deps));
});

test("no module of src/ reaches itself through its imports", () => {
  const graph = imports();
  for (const m of graph.keys()) assert.ok(!reach(graph, m).has(m), `${m} is in an import cycle`);
});

test("the batcher reaches no client; the client reaches no effect or worker module", () => {
  const graph = imports();
  const batcher = reach(graph, "batcher.ts");
  for (const m of ["client.ts", "effect.ts", "worker.ts"]) assert.ok(!batcher.has(m), `batcher.ts reaches ${m}`);
  const client = reach(graph, "client.ts");
  for (const m of ["effect.ts", "worker.ts", "idempotency.ts", "outbox.ts"]) assert.ok(!client.has(m), `client.ts reaches ${m}`);
  assert.ok(reach(graph, "effect.ts").has("client.ts"), "effect.ts depends on the client");
  assert.ok(reach(graph, "worker.ts").has("client.ts"), "worker.ts depends on the client");
});
