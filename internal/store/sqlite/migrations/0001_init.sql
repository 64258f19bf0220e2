-- Jobs, keyed by a UUIDv7 (16 bytes) so new rows append to the B-tree.
CREATE TABLE jobs (
    id               BLOB    NOT NULL PRIMARY KEY,
    queue            TEXT    NOT NULL,
    job_type         TEXT    NOT NULL,
    payload          BLOB    NOT NULL,
    idempotency_key  BLOB,
    priority         INTEGER NOT NULL,
    run_at           INTEGER NOT NULL, -- unix microseconds
    max_attempts     INTEGER NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    headers          BLOB,             -- JSON object, NULL when empty
    state            INTEGER NOT NULL, -- store.JobState
    created_at       INTEGER NOT NULL,
    finalized_at     INTEGER,
    result           BLOB,
    last_error       TEXT,
    lease_token      BLOB,
    lease_expires_at INTEGER,
    worker_id        TEXT
) WITHOUT ROWID;

-- Delivery order: priority, then run-at, then enqueue order (the id).
CREATE INDEX jobs_ready ON jobs (queue, priority DESC, run_at, id)
    WHERE state IN (1, 2);

-- Retention: finalized jobs by state and age.
CREATE INDEX jobs_finalized ON jobs (state, finalized_at)
    WHERE finalized_at IS NOT NULL;

-- Dedup records: (queue, key) -> job, compared byte for byte (BLOB keys).
CREATE TABLE dedup (
    queue             TEXT    NOT NULL,
    key               BLOB    NOT NULL,
    job_id            BLOB    NOT NULL,
    first_enqueued_at INTEGER NOT NULL,
    expires_at        INTEGER NOT NULL,
    fingerprint       BLOB    NOT NULL,
    hits              INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;

-- The sweeper walks this index from the oldest expiry, so its cost does not
-- grow with the number of live records.
CREATE INDEX dedup_expires ON dedup (expires_at);
