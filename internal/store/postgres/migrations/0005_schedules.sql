-- The state of [[schedules]] every node shares (store.Schedules), one row
-- per schedule name, times in microseconds: started_at, when a node first
-- saw the schedule (ticks at or before it never fire); last_tick, the latest
-- tick whose job was enqueued (NULL before the first). last_tick only rises
-- (GREATEST), whatever order nodes' advances commit in.
CREATE TABLE sepp_schedules (
    name       text   PRIMARY KEY,
    started_at bigint NOT NULL,
    last_tick  bigint
);
