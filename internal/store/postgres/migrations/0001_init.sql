-- Times are unix microseconds (bigint), as in the SQLite backend, so both
-- judge windows and leases the same way.
CREATE TABLE sepp_jobs (
    id               uuid     NOT NULL PRIMARY KEY,
    queue            text     NOT NULL,
    job_type         text     NOT NULL,
    payload          bytea    NOT NULL,
    idempotency_key  bytea,
    priority         integer  NOT NULL,
    run_at           bigint   NOT NULL,
    max_attempts     integer  NOT NULL,
    attempts         integer  NOT NULL DEFAULT 0,
    headers          bytea,
    state            smallint NOT NULL,
    created_at       bigint   NOT NULL,
    finalized_at     bigint,
    result           bytea,
    last_error       text,
    lease_token      bytea,
    lease_expires_at bigint,
    worker_id        text
);
CREATE INDEX sepp_jobs_ready ON sepp_jobs (queue, priority DESC, run_at, id) WHERE state IN (1, 2);
CREATE INDEX sepp_jobs_finalized ON sepp_jobs (state, finalized_at) WHERE finalized_at IS NOT NULL;
CREATE INDEX sepp_jobs_leases ON sepp_jobs (lease_expires_at) WHERE state = 3;

CREATE TABLE sepp_dedup (
    queue             text   NOT NULL,
    key               bytea  NOT NULL,
    job_id            uuid   NOT NULL,
    first_enqueued_at bigint NOT NULL,
    expires_at        bigint NOT NULL,
    fingerprint       bytea  NOT NULL,
    hits              bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, key)
);
CREATE INDEX sepp_dedup_expires ON sepp_dedup (expires_at);

CREATE TABLE sepp_queues (
    name   text    NOT NULL PRIMARY KEY,
    paused boolean NOT NULL DEFAULT false
);

CREATE TABLE sepp_effects (
    scope            text     NOT NULL,
    key              bytea    NOT NULL,
    state            smallint NOT NULL,
    token            bytea,
    lease_expires_at bigint,
    ttl              bigint   NOT NULL,
    result           bytea,
    completed_at     bigint,
    expires_at       bigint,
    PRIMARY KEY (scope, key)
);
CREATE UNIQUE INDEX sepp_effects_token ON sepp_effects (token) WHERE token IS NOT NULL;
CREATE INDEX sepp_effects_expires ON sepp_effects (expires_at) WHERE expires_at IS NOT NULL;
