-- release_key_on, fixed on each job when it is enqueued: the final states
-- (store.ReleaseOn bits: 1 completed, 2 dead, 4 cancelled) whose arrival
-- deletes the job's dedup record. 0, the value of every earlier job,
-- releases nothing.
ALTER TABLE sepp_jobs ADD COLUMN release_key_on smallint NOT NULL DEFAULT 0;
