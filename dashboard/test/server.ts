// A real `sepp serve` for the dashboard's tests, as clients/typescript's
// tests start one: a free loopback port, a temporary data directory. The
// binary is $SEPP_BIN, or built once from the repository with `go build`.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";

/** The dashboard directory (build-test/test/.. /..). */
export const dashboardDir = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** The repository root. */
export const repoDir = resolve(dashboardDir, "..");

export function seppBin(): string {
  const env = process.env["SEPP_BIN"];
  if (env) return env;
  const out = join(mkdtempSync(join(tmpdir(), "sepp-bin-")), "sepp");
  execFileSync("go", ["build", "-o", out, "./cmd/sepp"], { cwd: repoDir, stdio: "inherit" });
  process.env["SEPP_BIN"] = out;
  return out;
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      const port = typeof a === "object" && a ? a.port : 0;
      s.close(() => res(port));
    });
  });
}

export class TestServer {
  private proc: ChildProcess | undefined;
  private constructor(readonly dir: string, readonly port: number, readonly addr = `http://127.0.0.1:${port}`) {}

  /** Starts a server with the TOML config `config` (may be empty) and the environment `env`. */
  static async start(config = "", env: Record<string, string> = {}): Promise<TestServer> {
    const dir = mkdtempSync(join(tmpdir(), "sepp-dashboard-test-"));
    if (config) writeFileSync(join(dir, "sepp.toml"), config);
    const s = new TestServer(dir, await freePort());
    const args = ["serve"];
    if (config) args.push("--config", join(dir, "sepp.toml"));
    const p = spawn(seppBin(), args, {
      env: { ...process.env, ...env, SEPP_LISTEN: `127.0.0.1:${s.port}`, SEPP_STORAGE_PATH: join(dir, "data") },
      stdio: ["ignore", "ignore", "pipe"],
    });
    s.proc = p;
    let stderr = "";
    await new Promise<void>((res, rej) => {
      const onData = (b: Buffer) => {
        stderr += b.toString();
        if (stderr.includes("sepp serving")) {
          p.stderr!.off("data", onData);
          p.stderr!.on("data", () => {});
          res();
        }
      };
      p.stderr!.on("data", onData);
      p.once("exit", (code) => rej(new Error(`sepp serve exited with ${code} before serving:\n${stderr}`)));
    });
    return s;
  }

  async stop(): Promise<void> {
    const p = this.proc;
    if (p && p.exitCode === null && p.signalCode === null) {
      await new Promise<void>((res) => {
        p.once("exit", () => res());
        p.kill("SIGKILL");
      });
    }
    if (existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true });
  }
}
