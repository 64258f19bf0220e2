// deriveKey against the Go server's own test vectors
// (internal/jsonkey/testdata/vectors.json, written by its TestVectors): the
// same key byte for byte, or an InvalidFieldError naming the same pointer.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { deriveKey, InvalidFieldError, SeppError } from "sepp";
import { repoDir } from "./server.js";

interface Vector {
  name: string;
  payload?: string;
  payload_hex?: string;
  pointers: string[];
  key?: string;
  error?: { pointer: string; message: string };
}

const vectors = JSON.parse(readFileSync(join(repoDir, "internal/jsonkey/testdata/vectors.json"), "utf8")) as Vector[];

// Messages that name a byte the JavaScript side never sees: the payload's
// invalid UTF-8 fails in TextDecoder, before the parser.
const messageDiffers = (v: Vector) => v.payload_hex !== undefined;

test("the Go vectors: the same keys and errors", () => {
  assert.ok(vectors.length > 100, `only ${vectors.length} vectors`);
  for (const v of vectors) {
    const payload = v.payload_hex !== undefined ? Buffer.from(v.payload_hex, "hex") : v.payload ?? "";
    for (const input of typeof payload === "string" ? [payload, new TextEncoder().encode(payload)] : [new Uint8Array(payload)]) {
      if (v.key !== undefined) {
        assert.equal(deriveKey(input, v.pointers), v.key, v.name);
        continue;
      }
      assert.throws(
        () => deriveKey(input, v.pointers),
        (e: unknown) => {
          assert.ok(e instanceof InvalidFieldError, `${v.name}: ${String(e)}`);
          assert.equal(e.reason, "INVALID_FIELD");
          assert.equal(e.errorMetadata["pointer"], v.error!.pointer, v.name);
          if (!messageDiffers(v)) assert.equal(e.rawMessage, v.error!.message, v.name);
          return true;
        },
        v.name,
      );
    }
  }
});

test("the README's example", () => {
  assert.equal(deriveKey('{"amount": 100, "account": "acc-123"}', ["/account", "/amount"]), '["acc-123",100]');
  assert.equal(deriveKey('{"account":"acc-123","amount":1.00e2,"note":"retry"}', ["/account", "/amount"]), '["acc-123",100]');
});

test("a string payload with a lone surrogate is refused: its UTF-8 would differ", () => {
  assert.throws(() => deriveKey('{"a":"\ud800"}', ["/a"]), (e: unknown) => e instanceof SeppError && e.errorMetadata["pointer"] === "");
});

test("values compare as JSON.stringify and Number::toString give them", () => {
  const values = [0, -0, 1e21, 1e-7, 0.000001, 333333333.33333329, 1e30, 4.5, 0.002, 1e23, 5e-324, 1.7976931348623157e308, "\u2028\u0000é😀", true, null];
  for (const x of values) {
    const expect = typeof x === "number" ? String(x) : JSON.stringify(x);
    assert.equal(deriveKey(JSON.stringify({ x }), ["/x"]), `[${expect}]`);
  }
});
