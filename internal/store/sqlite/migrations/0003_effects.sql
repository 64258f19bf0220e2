-- Effect keys: (scope, key) -> a claim in progress, or a completed result.
CREATE TABLE effects (
    scope            TEXT    NOT NULL,
    key              BLOB    NOT NULL,
    state            INTEGER NOT NULL, -- store.EffectState: 2 completed, 3 in progress
    token            BLOB,             -- the holder's token, while in progress
    lease_expires_at INTEGER,          -- while in progress
    ttl              INTEGER NOT NULL, -- microseconds the completed record lives
    result           BLOB,
    completed_at     INTEGER,
    expires_at       INTEGER,          -- completed_at + ttl
    PRIMARY KEY (scope, key)
) WITHOUT ROWID;

CREATE UNIQUE INDEX effects_token ON effects (token) WHERE token IS NOT NULL;

-- The sweeper removes completed records from the oldest expiry.
CREATE INDEX effects_expires ON effects (expires_at) WHERE expires_at IS NOT NULL;
