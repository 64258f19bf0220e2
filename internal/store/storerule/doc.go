// Package storerule holds the rules every store backend applies the same
// way, whatever its engine: how a job is prepared for writing (its UUIDv7 id,
// run-at and initial state, fingerprint, headers), how an enqueue is decided
// against the dedup records (new, hit, expired-as-absent, payload mismatch,
// conflict, the same key twice in one group), which schema migrations to
// apply and when to refuse a schema newer than the binary, and what a lease
// expiry, a failure, an effect claim and the sweeper's retention decide.
//
// The functions here are pure: they read no storage and write none. A
// backend keeps its SQL or its key layout and its transactions, and asks
// this package what to write. Times are unix microseconds, the resolution
// every backend keeps.
package storerule
