// A real `sepp serve` for the tests: started on a free loopback port with a
// temporary data directory, killed with SIGKILL and restarted on the same
// port and directory for crash tests. The binary is $SEPP_BIN, or built once
// from the repository (../.. from this package) with `go build`.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";

/** The package directory (clients/typescript). */
export const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** The repository root. */
export const repoDir = resolve(packageDir, "../..");

let builtBin: string | undefined;

/** The sepp binary: $SEPP_BIN, or one built from the repository into a temp dir. */
export function seppBin(): string {
  const env = process.env["SEPP_BIN"];
  if (env) return env;
  if (builtBin && existsSync(builtBin)) return builtBin;
  const dir = mkdtempSync(join(tmpdir(), "sepp-bin-"));
  const out = join(dir, "sepp");
  execFileSync("go", ["build", "-o", out, "./cmd/sepp"], { cwd: repoDir, stdio: "inherit" });
  builtBin = out;
  return out;
}

/** A free TCP port on 127.0.0.1 (the OS picks it). */
export async function freePort(): Promise<number> {
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

/** Whether 127.0.0.1:port can be bound now. */
export async function portIsFree(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = createServer();
    s.once("error", () => res(false));
    s.listen(port, "127.0.0.1", () => s.close(() => res(true)));
  });
}

/** A running test server. */
export class TestServer {
  readonly dir: string;
  readonly port: number;
  readonly addr: string;
  private proc: ChildProcess | undefined;
  private stderr = "";

  private constructor(port: number, dir: string) {
    this.port = port;
    this.dir = dir;
    this.addr = `http://127.0.0.1:${port}`;
  }

  /**
   * Starts a server with the TOML config `config` (may be empty) on `port`
   * (default: a free one).
   */
  static async start(config = "", port?: number): Promise<TestServer> {
    const dir = mkdtempSync(join(tmpdir(), "sepp-ts-test-"));
    if (config) writeFileSync(join(dir, "sepp.toml"), config);
    const s = new TestServer(port ?? (await freePort()), dir);
    await s.launch();
    return s;
  }

  /** Starts the process and waits for "sepp serving" on its stderr. */
  async launch(): Promise<void> {
    const args = ["serve"];
    if (existsSync(join(this.dir, "sepp.toml"))) args.push("--config", join(this.dir, "sepp.toml"));
    this.stderr = "";
    const p = spawn(seppBin(), args, {
      env: { ...process.env, SEPP_LISTEN: `127.0.0.1:${this.port}`, SEPP_STORAGE_PATH: join(this.dir, "data") },
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.proc = p;
    await new Promise<void>((res, rej) => {
      const onData = (b: Buffer) => {
        this.stderr += b.toString();
        if (this.stderr.includes("sepp serving")) {
          p.stderr!.off("data", onData);
          // Keep draining stderr so the server never blocks on a full pipe.
          p.stderr!.on("data", () => {});
          res();
        }
      };
      p.stderr!.on("data", onData);
      p.once("exit", (code) => rej(new Error(`sepp serve exited with ${code} before serving:\n${this.stderr}`)));
    });
  }

  /** SIGKILLs the server and waits for it to be gone. */
  async kill(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((res) => {
      p.once("exit", () => res());
      p.kill("SIGKILL");
    });
  }

  /** SIGKILLs the server and starts it again on the same port and data directory. */
  async restart(): Promise<void> {
    await this.kill();
    // The port may take a moment to be bindable again; retry the launch.
    for (let i = 0; ; i++) {
      try {
        await this.launch();
        return;
      } catch (err) {
        if (i >= 50) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** Stops the server and removes its directory. */
  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Polls `cond` until it holds (every 20 ms), failing after `ms` with `what`. */
export async function waitFor(what: string, cond: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
