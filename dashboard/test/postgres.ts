// PostgreSQL for the outbox test, through psql: the database at
// SEPP_TEST_POSTGRES_URL (CI sets it), or the default local one.
import { execFileSync } from "node:child_process";

export const PG_URL = process.env["SEPP_TEST_POSTGRES_URL"] || "postgres://root@127.0.0.1:5432/test?sslmode=disable";

/** Runs SQL through psql on PG_URL and returns its unaligned output. */
export function psql(sql: string): string {
  return execFileSync("psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", PG_URL], {
    input: sql,
    encoding: "utf8",
    stdio: ["pipe", "pipe", "pipe"],
  }).trim();
}

/**
 * Why PostgreSQL cannot be used, or undefined when it can. Without
 * SEPP_TEST_POSTGRES_URL a missing psql or database skips the test; with it
 * the test fails instead.
 */
export function postgresMissing(): string | undefined {
  try {
    psql("SELECT 1");
    return undefined;
  } catch (err) {
    const why = `PostgreSQL at ${PG_URL} through psql: ${(err as Error).message.split("\n")[0]}`;
    if (process.env["SEPP_TEST_POSTGRES_URL"]) throw new Error(why);
    return why;
  }
}
