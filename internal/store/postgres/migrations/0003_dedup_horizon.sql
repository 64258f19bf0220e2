-- The dedup horizon (storerule.SweepCut): the latest cut up to which a sweep
-- deleted dedup records, in microseconds. A sweep raises it in the
-- transaction of its deletions; an enqueue reads it after claiming its keys
-- and refuses when its Now is at or before it. One row.
CREATE TABLE sepp_dedup_horizon (
    id smallint PRIMARY KEY CHECK (id = 1),
    horizon bigint NOT NULL
);
INSERT INTO sepp_dedup_horizon (id, horizon) VALUES (1, 0);
