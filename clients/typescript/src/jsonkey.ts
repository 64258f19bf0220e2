/**
 * Keys derived from fields of a JSON payload, as the server derives them for
 * a queue's `key_fields`: the canonical JSON (RFC 8785, JCS) of the array of
 * the values that the JSON pointers (RFC 6901) name, such as
 * `["acc-123",100]`. The same algorithm as the server's (Go,
 * `internal/jsonkey`), byte for byte; the two share their test vectors.
 * One difference: the server accepts arrays and objects nested up to 10000
 * deep, while this recursive parser stops where the JavaScript stack does (a
 * few thousand levels in Node), with an {@link InvalidFieldError}.
 *
 * @module
 */
import { InvalidFieldError, Reason } from "./errors.js";
import { isWellFormed, utf8Length } from "./keys.js";

/** The deepest nesting of arrays and objects accepted, as on the server. */
const MAX_DEPTH = 10000;

class Num {
  constructor(readonly literal: string) {}
}
class Obj {
  constructor(readonly members: Map<string, Value>) {}
}
type Value = null | boolean | string | Num | Value[] | Obj;

function kindOf(v: Value): string {
  if (v === null) return "null";
  if (typeof v === "boolean") return "a boolean";
  if (typeof v === "string") return "a string";
  if (v instanceof Num) return "a number";
  if (Array.isArray(v)) return "an array";
  return "an object";
}

class SyntaxProblem {
  constructor(
    readonly msg: string,
    readonly pos: number,
  ) {}
}

class Missing {
  constructor(readonly why: string) {}
}

class NotFinite {
  constructor(readonly literal: string) {}
}

/** A JSON string literal of s, as JSON.stringify (and the server) write it. */
function quote(s: string): string {
  return JSON.stringify(s);
}

/** The parser: RFC 8259 text that must also be I-JSON (RFC 7493). */
class Parser {
  pos = 0;
  depth = 0;
  path: string[] = [];
  constructor(readonly s: string) {}

  fail(msg: string): never {
    throw new SyntaxProblem(msg, this.pos);
  }

  describe(): string {
    if (this.pos >= this.s.length) return "end of input";
    const c = this.s.charCodeAt(this.pos);
    if (c >= 0x20 && c < 0x7f) {
      const ch = this.s[this.pos];
      if (ch === "'") return "character '\\''";
      if (ch === "\\") return "character '\\\\'";
      return `character '${ch}'`;
    }
    const cp = this.s.codePointAt(this.pos)!;
    const first = new TextEncoder().encode(String.fromCodePoint(cp))[0]!;
    return "byte 0x" + first.toString(16);
  }

  skipSpace(): void {
    const s = this.s;
    while (this.pos < s.length) {
      const c = s.charCodeAt(this.pos);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.pos++;
      else return;
    }
  }

  document(): Value {
    this.skipSpace();
    const v = this.value();
    this.skipSpace();
    if (this.pos < this.s.length) this.fail(`unexpected ${this.describe()} after the JSON value`);
    return v;
  }

  value(): Value {
    const s = this.s;
    if (this.pos >= s.length) this.fail("unexpected end of input, expected a JSON value");
    const c = s[this.pos]!;
    switch (c) {
      case "{":
        return this.object();
      case "[":
        return this.array();
      case '"':
        return this.string();
      case "t":
        return this.literal("true", true);
      case "f":
        return this.literal("false", false);
      case "n":
        return this.literal("null", null);
    }
    if (c === "-" || (c >= "0" && c <= "9")) return this.number();
    this.fail(`unexpected ${this.describe()}, expected a JSON value`);
  }

  literal(word: string, v: Value): Value {
    if (!this.s.startsWith(word, this.pos)) this.fail(`unexpected ${this.describe()}, expected a JSON value`);
    this.pos += word.length;
    return v;
  }

  enter(): void {
    this.depth++;
    if (this.depth > MAX_DEPTH) this.fail(`arrays and objects nested more than ${MAX_DEPTH} deep`);
  }

  object(): Value {
    const s = this.s;
    this.enter();
    this.pos++;
    const members = new Map<string, Value>();
    this.skipSpace();
    if (s[this.pos] === "}") {
      this.pos++;
      this.depth--;
      return new Obj(members);
    }
    for (;;) {
      this.skipSpace();
      if (s[this.pos] !== '"') this.fail(`unexpected ${this.describe()}, expected a member name in double quotes`);
      const start = this.pos;
      const name = this.string();
      if (members.has(name)) {
        this.pos = start;
        this.fail(
          `duplicate member name ${quote(name)} in the object at ${quote(pointerOf(this.path))} (I-JSON, which RFC 8785 requires, forbids them)`,
        );
      }
      this.skipSpace();
      if (s[this.pos] !== ":") this.fail(`unexpected ${this.describe()}, expected ':' after a member name`);
      this.pos++;
      this.skipSpace();
      this.path.push(name);
      const v = this.value();
      this.path.pop();
      members.set(name, v);
      this.skipSpace();
      if (s[this.pos] === ",") {
        this.pos++;
        continue;
      }
      if (s[this.pos] === "}") {
        this.pos++;
        this.depth--;
        return new Obj(members);
      }
      this.fail(`unexpected ${this.describe()}, expected ',' or '}' in an object`);
    }
  }

  array(): Value {
    const s = this.s;
    this.enter();
    this.pos++;
    const out: Value[] = [];
    this.skipSpace();
    if (s[this.pos] === "]") {
      this.pos++;
      this.depth--;
      return out;
    }
    for (;;) {
      this.skipSpace();
      this.path.push(String(out.length));
      const v = this.value();
      this.path.pop();
      out.push(v);
      this.skipSpace();
      if (s[this.pos] === ",") {
        this.pos++;
        continue;
      }
      if (s[this.pos] === "]") {
        this.pos++;
        this.depth--;
        return out;
      }
      this.fail(`unexpected ${this.describe()}, expected ',' or ']' in an array`);
    }
  }

  number(): Value {
    const s = this.s;
    const start = this.pos;
    let i = this.pos;
    const isDigit = (j: number) => j < s.length && s.charCodeAt(j) >= 0x30 && s.charCodeAt(j) <= 0x39;
    const digits = () => {
      let n = 0;
      while (isDigit(i)) {
        i++;
        n++;
      }
      return n;
    };
    if (s[i] === "-") i++;
    if (s[i] === "0") i++;
    else if (isDigit(i)) digits();
    else {
      this.pos = i;
      this.fail(`unexpected ${this.describe()} in a number, expected a digit`);
    }
    if (s[i] === ".") {
      i++;
      if (digits() === 0) {
        this.pos = i;
        this.fail(`unexpected ${this.describe()} in a number, expected a digit after '.'`);
      }
    }
    if (s[i] === "e" || s[i] === "E") {
      i++;
      if (s[i] === "+" || s[i] === "-") i++;
      if (digits() === 0) {
        this.pos = i;
        this.fail(`unexpected ${this.describe()} in a number, expected a digit in the exponent`);
      }
    }
    this.pos = i;
    return new Num(s.slice(start, i));
  }

  string(): string {
    const s = this.s;
    this.pos++;
    let out = "";
    let run = this.pos;
    while (this.pos < s.length) {
      const c = s.charCodeAt(this.pos);
      if (c === 0x22) {
        out += s.slice(run, this.pos);
        this.pos++;
        return out;
      }
      if (c < 0x20) {
        this.fail(`control character 0x${c.toString(16)} in a string (write it as an escape like \\n or \\u001f)`);
      }
      if (c === 0x5c) {
        out += s.slice(run, this.pos);
        out += this.escape();
        run = this.pos;
        continue;
      }
      this.pos++;
    }
    this.fail("unexpected end of input in a string");
  }

  escape(): string {
    const s = this.s;
    if (this.pos + 1 >= s.length) {
      this.pos++;
      this.fail("unexpected end of input in a string");
    }
    const c = s[this.pos + 1]!;
    const simple: Record<string, string> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
    if (Object.prototype.hasOwnProperty.call(simple, c)) {
      this.pos += 2;
      return simple[c]!;
    }
    if (c === "u") {
      const r = hex4(s, this.pos + 2);
      if (r < 0) {
        this.pos += 2;
        this.fail("invalid \\u escape in a string, expected four hex digits");
      }
      if (r >= 0xd800 && r < 0xdc00) {
        if (s[this.pos + 6] === "\\" && s[this.pos + 7] === "u") {
          const r2 = hex4(s, this.pos + 8);
          if (r2 >= 0xdc00 && r2 < 0xe000) {
            this.pos += 12;
            return String.fromCharCode(r, r2);
          }
        }
        this.fail(`lone surrogate \\u${r.toString(16)} in a string (I-JSON forbids it)`);
      }
      if (r >= 0xdc00 && r < 0xe000) this.fail(`lone surrogate \\u${r.toString(16)} in a string (I-JSON forbids it)`);
      this.pos += 6;
      return String.fromCharCode(r);
    }
    this.pos++;
    this.fail(`invalid escape \\${String.fromCodePoint(s.codePointAt(this.pos)!)} in a string`);
  }
}

function hex4(s: string, i: number): number {
  if (i + 4 > s.length) return -1;
  const h = s.slice(i, i + 4);
  return /^[0-9a-fA-F]{4}$/.test(h) ? parseInt(h, 16) : -1;
}

function pointerOf(tokens: string[]): string {
  return tokens.map((t) => "/" + t.replace(/~/g, "~0").replace(/\//g, "~1")).join("");
}

/** The RFC 8785 serialization of v. */
function canonical(v: Value): string {
  if (v === null) return "null";
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "string") return JSON.stringify(v);
  if (v instanceof Num) {
    const n = Number(v.literal);
    if (!Number.isFinite(n)) throw new NotFinite(v.literal);
    return String(n); // Number::toString; -0 is "0"
  }
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  // The default sort compares strings by UTF-16 code units, as RFC 8785 sorts.
  const names = [...v.members.keys()].sort();
  return "{" + names.map((k) => JSON.stringify(k) + ":" + canonical(v.members.get(k)!)).join(",") + "}";
}

/** Whether p is a JSON pointer (RFC 6901); the reason when it is not. */
function checkPointer(p: string): string | undefined {
  if (p === "") return undefined;
  if (!p.startsWith("/")) return 'it must start with "/"';
  for (let i = 0; i < p.length; i++) {
    if (p[i] === "~" && p[i + 1] !== "0" && p[i + 1] !== "1") return '"~" must be written "~0", and "/" inside a name "~1"';
  }
  return undefined;
}

function arrayIndex(token: string, n: number): number | string {
  if (token === "-") return '"-" names the element after the last one, which never exists; name an index from 0';
  if (!/^(0|[1-9][0-9]*)$/.test(token)) return `${quote(token)} is not an array index (a decimal number without leading zeros, from 0)`;
  const i = token.length > 15 ? Infinity : Number(token);
  if (i >= n) return `not in the payload (there is no element ${token})`;
  return i;
}

function resolve(doc: Value, p: string): Value | Missing {
  if (p === "") return doc;
  let v = doc;
  let at = 0;
  for (const raw of p.slice(1).split("/")) {
    const token = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    const parent = p.slice(0, at);
    if (v instanceof Obj) {
      if (!v.members.has(token)) {
        if (parent === "") return new Missing("not in the payload");
        return new Missing(`not in the payload (the object at ${quote(parent)} has no member ${quote(token)})`);
      }
      v = v.members.get(token)!;
    } else if (Array.isArray(v)) {
      const i = arrayIndex(token, v.length);
      if (typeof i === "string") return new Missing(`${i} (${quote(parent)} is an array of ${v.length})`);
      v = v[i]!;
    } else {
      return new Missing(`not in the payload (${quote(parent)} is ${kindOf(v)}, which has no members or elements)`);
    }
    at += 1 + raw.length;
  }
  return v;
}

function quoteList(list: string[]): string {
  // As the server: the limit counts the list without its closing bracket.
  const s = "[" + list.map(quote).join(",");
  const b = new TextEncoder().encode(s);
  if (b.length <= 300) return s + "]";
  let cut = 300;
  while (cut > 0 && (b[cut]! & 0xc0) === 0x80) cut--;
  return new TextDecoder().decode(b.subarray(0, cut)) + "…";
}

function fieldError(pointer: string, reason: string): InvalidFieldError {
  const message = pointer === "" ? `payload: ${reason}` : `field ${quote(pointer)}: ${reason}`;
  return new InvalidFieldError(Reason.InvalidField, message, { metadata: { pointer } });
}

/**
 * The idempotency key that a queue with `key_fields = fields` derives from
 * `payload`, the same key the server gives a job enqueued without one: the
 * canonical JSON (RFC 8785) of the array of the values the JSON pointers
 * name. `deriveKey('{"amount":100,"account":"acc-123"}', ["/account", "/amount"])`
 * is `'["acc-123",100]'`.
 *
 * The payload (text, or its UTF-8 bytes) must be a JSON object that is
 * I-JSON: valid UTF-8, no duplicate member names, no lone surrogates. Numbers
 * count as IEEE-754 doubles, so `100`, `100.0` and `1e2` give the same key and
 * integers beyond 2^53 are rounded (send those as strings).
 *
 * @param payload - the job's payload.
 * @param fields - the queue's `key_fields`, JSON pointers such as `"/account"`.
 * @returns the key.
 * @throws {@link InvalidFieldError} with the server's message and
 *   `errorMetadata.pointer` naming the field at fault (`""` when the payload
 *   itself is).
 */
export function deriveKey(payload: string | Uint8Array, fields: readonly string[]): string {
  const pointers = [...fields];
  if (pointers.length === 0) {
    throw fieldError("", 'no key_fields to derive an idempotency key from; list JSON pointers like ["/account", "/amount"]');
  }
  for (const p of pointers) {
    const why = checkPointer(p);
    if (why !== undefined) {
      throw fieldError(p, `is not a JSON pointer (RFC 6901): ${why}; write it like "/account" or "/order/id"`);
    }
  }
  const advice = "the queue derives its idempotency key from key_fields " + quoteList(pointers);
  const needObject = `; ${advice}, so every job needs a JSON object payload holding them, or an explicit key`;
  let text: string;
  if (typeof payload === "string") {
    if (!isWellFormed(payload)) throw fieldError("", "is not valid JSON (I-JSON, RFC 7493): it holds a lone surrogate, which has no UTF-8" + needObject);
    text = payload;
  } else {
    try {
      text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(payload);
    } catch {
      throw fieldError("", "is not valid JSON (I-JSON, RFC 7493): invalid UTF-8" + needObject);
    }
  }
  if (text.length === 0) throw fieldError("", "is empty, not a JSON object" + needObject);
  let doc: Value;
  const parser = new Parser(text);
  try {
    doc = parser.document();
  } catch (e) {
    if (e instanceof SyntaxProblem) {
      const offset = utf8Length(text.slice(0, e.pos));
      throw fieldError("", `is not valid JSON (I-JSON, RFC 7493): ${e.msg} at byte offset ${offset}${needObject}`);
    }
    if (e instanceof RangeError) {
      throw fieldError("", `is not valid JSON (I-JSON, RFC 7493): arrays and objects nested too deep for this JavaScript stack${needObject}`);
    }
    throw e;
  }
  if (!(doc instanceof Obj)) throw fieldError("", `is ${kindOf(doc)}, not a JSON object${needObject}`);
  const parts: string[] = [];
  for (const p of pointers) {
    const v = resolve(doc, p);
    if (v instanceof Missing) {
      throw fieldError(p, `${v.why}; ${advice}, so every job needs them, or send an explicit key`);
    }
    try {
      parts.push(canonical(v));
    } catch (e) {
      if (e instanceof NotFinite) {
        throw fieldError(
          p,
          `the number ${e.literal} is beyond the range of IEEE-754 doubles, which RFC 8785 numbers are; send a number within ±1.7976931348623157e308 (or the value as a string), or an explicit key`,
        );
      }
      if (e instanceof RangeError) throw fieldError(p, "nested too deep for this JavaScript stack");
      throw e;
    }
  }
  return "[" + parts.join(",") + "]";
}
