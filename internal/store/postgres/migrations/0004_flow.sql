-- Per-key flow control.
--
-- A rule key's slots (storerule.RuleSlots) when it holds more than one.
ALTER TABLE sepp_dedup ADD COLUMN slots bigint[];
-- follows: the job a follow-up (when_running = "run_again") waits for; the
-- follow-up stays scheduled and off the ready index until that job ends.
-- flow: bit 1, a follow-up waits for this job.
ALTER TABLE sepp_jobs ADD COLUMN follows uuid, ADD COLUMN flow smallint NOT NULL DEFAULT 0;
DROP INDEX sepp_jobs_ready;
CREATE INDEX sepp_jobs_ready ON sepp_jobs (queue, priority DESC, run_at, id) WHERE state IN (1, 2) AND follows IS NULL;
CREATE INDEX sepp_jobs_follows ON sepp_jobs (follows) WHERE follows IS NOT NULL;
-- Every statement that takes a job to a final state, on any node, releases
-- the follow-up that waits for it, in the same transaction, and tells the
-- nodes its queue has a deliverable job.
CREATE FUNCTION sepp_job_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE sepp_jobs SET follows = NULL WHERE follows = NEW.id AND state IN (1, 2);
  IF FOUND THEN
    PERFORM pg_notify('sepp_jobs', NEW.queue);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER sepp_job_ended AFTER UPDATE OF state ON sepp_jobs FOR EACH ROW
  WHEN (NEW.flow & 1 <> 0 AND NEW.state IN (4, 5, 6) AND OLD.state NOT IN (4, 5, 6))
  EXECUTE FUNCTION sepp_job_ended();
