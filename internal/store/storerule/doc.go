// Package storerule holds the rules every store backend applies the same
// way, whatever its engine: how a job is prepared for writing (its UUIDv7 id,
// run-at and initial state, fingerprint, headers); how a batch of enqueues is
// decided against the dedup records and against itself (Group.Decide: new,
// hit, expired-as-absent, payload mismatch, conflict, duplicate, the same
// key twice, uniqueness rules and a refusal freeing later items, atomic
// calls, replace and debounce, the dedup horizon); which schema migrations
// to apply and when to refuse a schema newer than the binary; and what a
// lease expiry, a failure, an effect claim and the sweeper's retention
// decide.
//
// The functions here are pure: they read no storage and write none. A
// backend keeps its SQL or its key layout, its locks and its transactions:
// it reads what this package names (Keys, Replacing), asks it to decide,
// and writes what it decided. Times are unix microseconds, the resolution
// every backend keeps.
package storerule
