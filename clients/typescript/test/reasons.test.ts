// The reasons of the proto enum sepp.v1.Reason (proto/sepp/v1/reason.proto,
// the one list of reasons) and this client's error classes: one class per
// reason a client call can get, no class for a reason the enum lacks.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ReasonSchema } from "sepp/gen/reason_pb";
import { Reason, SeppError, newSeppError, reasonClasses } from "sepp";

/** Not reasons a client call gets: the zero value, and the two only webhook endpoints answer with. */
const notClient = new Set(["REASON_UNSPECIFIED", "SIGNATURE_INVALID", "METHOD_NOT_ALLOWED"]);

const enumReasons = ReasonSchema.values.map((v) => v.name).filter((n) => !notClient.has(n));

test("every reason of sepp.v1.Reason has its error class, and every class a reason of the enum", () => {
  assert.ok(enumReasons.length > 10, `only ${enumReasons.length} reasons in the generated enum`);
  const classes = Object.keys(reasonClasses);
  for (const name of enumReasons) assert.ok(classes.includes(name), `reason ${name} has no error class`);
  for (const name of classes) assert.ok(enumReasons.includes(name), `error class for ${name}, which sepp.v1.Reason lacks`);
  assert.equal(new Set(Object.values(reasonClasses)).size, classes.length, "a class of its own for each reason");
});

test("an error with a reason is an instance of that reason's class, and of no other", () => {
  for (const name of enumReasons) {
    const cls = reasonClasses[name as keyof typeof reasonClasses];
    const err = newSeppError(name, "m");
    assert.ok(err instanceof cls, name);
    assert.ok(err instanceof SeppError, name);
    assert.equal(err.reason, name);
    for (const [other, otherCls] of Object.entries(reasonClasses)) {
      if (other !== name) assert.ok(!(err instanceof otherCls), `${name} is also a ${other}`);
    }
  }
  // A reason this version does not know is a plain SeppError that keeps it.
  const unknown = newSeppError("A_REASON_FROM_A_NEWER_SERVER", "m");
  assert.equal(unknown.constructor, SeppError);
  assert.equal(unknown.reason, "A_REASON_FROM_A_NEWER_SERVER");
});

test("Reason names each reason as it reads in TypeScript", () => {
  assert.equal(Reason.IdempotencyKeyTooLong, "IDEMPOTENCY_KEY_TOO_LONG");
  assert.equal(Reason.DedupRuleViolated, "DEDUP_RULE_VIOLATED");
  assert.equal(Reason.Unavailable, "UNAVAILABLE");
  assert.deepEqual(Object.values(Reason).sort(), [...enumReasons].sort());
});
