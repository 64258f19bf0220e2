-- Leases that can expire, soonest first.
CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE state = 3;

-- Per-queue state that is not configuration: paused or not.
CREATE TABLE queues (
    name   TEXT    NOT NULL PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
