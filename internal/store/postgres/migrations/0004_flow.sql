-- Per-key flow control.
--
-- A rule key's slots (storerule.RuleSlots) when it holds more than one.
ALTER TABLE sepp_dedup ADD COLUMN slots bigint[];
-- follows: the job a follow-up (when_running = "run_again") waits for; the
-- follow-up stays scheduled and off the ready index until that job ends.
-- flow: bit 1, a follow-up waits for this job.
-- ckey, climit, cordered: the job's key under [queues.concurrency], fixed
-- when it is enqueued (NULL: none); slot: it holds a slot of its key;
-- waiting: it waits for one, off the ready index (storerule.KeyCount).
-- rkey, rlimit, rperiod (µs): the job's key under [queues.rate], fixed
-- when it is enqueued (NULL: none); rwaiting: it waits, off the ready
-- index, for its rate key's window, which had room again at rfrees_at.
ALTER TABLE sepp_jobs ADD COLUMN follows uuid, ADD COLUMN flow smallint NOT NULL DEFAULT 0,
  ADD COLUMN ckey text, ADD COLUMN climit integer, ADD COLUMN cordered boolean NOT NULL DEFAULT false,
  ADD COLUMN slot boolean NOT NULL DEFAULT false, ADD COLUMN waiting boolean NOT NULL DEFAULT false,
  ADD COLUMN rkey text, ADD COLUMN rlimit integer, ADD COLUMN rperiod bigint,
  ADD COLUMN rwaiting boolean NOT NULL DEFAULT false, ADD COLUMN rfrees_at bigint;
DROP INDEX sepp_jobs_ready;
CREATE INDEX sepp_jobs_ready ON sepp_jobs (queue, priority DESC, run_at, id)
  WHERE state IN (1, 2) AND follows IS NULL AND NOT waiting AND NOT rwaiting;
CREATE INDEX sepp_jobs_rate_waiting ON sepp_jobs (queue, rkey, priority DESC, run_at, id) WHERE rwaiting;
-- A rate key's record (storerule.RateRoom): its slots, how many of its jobs
-- wait, and when to look at it again (timer): when its window has room for
-- them, or, with none waiting, when its last slot leaves the window and the
-- row can go.
CREATE TABLE sepp_rate (
    queue   text     NOT NULL,
    key     text     NOT NULL,
    rlimit  integer  NOT NULL,
    period  bigint   NOT NULL,
    slots   bigint[] NOT NULL DEFAULT '{}',
    waiting bigint   NOT NULL DEFAULT 0,
    timer   bigint,
    PRIMARY KEY (queue, key)
);
CREATE INDEX sepp_rate_timer ON sepp_rate (timer) WHERE timer IS NOT NULL;
CREATE INDEX sepp_rate_waiting ON sepp_rate (queue, timer) WHERE waiting > 0;
CREATE INDEX sepp_jobs_follows ON sepp_jobs (follows) WHERE follows IS NOT NULL;
-- A concurrency key's waiting list: in enqueue order when ordered, in
-- delivery order otherwise.
CREATE INDEX sepp_jobs_waiting_ordered ON sepp_jobs (queue, ckey, id) WHERE waiting AND cordered;
CREATE INDEX sepp_jobs_waiting ON sepp_jobs (queue, ckey, priority DESC, run_at, id) WHERE waiting AND NOT cordered;
-- A concurrency key's count: the jobs holding its slots and those waiting
-- for one. A key with neither has no row.
CREATE TABLE sepp_concurrency (
    queue   text   NOT NULL,
    key     text   NOT NULL,
    active  bigint NOT NULL DEFAULT 0,
    waiting bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, key)
);

-- sepp_arrive admits a job of concurrency key (q, k) with limit lim, or
-- counts it waiting; ordered keys admit only when none waits. It returns
-- whether the job was admitted; the caller sets the job's slot or waiting.
CREATE FUNCTION sepp_arrive(q text, k text, lim integer, ordered boolean) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  a bigint;
  w bigint;
BEGIN
  INSERT INTO sepp_concurrency (queue, key) VALUES (q, k) ON CONFLICT DO NOTHING;
  SELECT active, waiting INTO a, w FROM sepp_concurrency WHERE queue = q AND key = k FOR UPDATE;
  IF a < lim AND (NOT ordered OR w = 0) THEN
    UPDATE sepp_concurrency SET active = active + 1 WHERE queue = q AND key = k;
    RETURN true;
  END IF;
  UPDATE sepp_concurrency SET waiting = waiting + 1 WHERE queue = q AND key = k;
  RETURN false;
END $$;

-- sepp_release_slot frees a slot of (q, k) and admits the first job that
-- waits for one (which takes the slot over), telling the nodes its queue
-- has a deliverable job.
CREATE FUNCTION sepp_release_slot(q text, k text, ordered boolean) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  w bigint;
  h uuid;
BEGIN
  SELECT waiting INTO w FROM sepp_concurrency WHERE queue = q AND key = k FOR UPDATE;
  IF w > 0 THEN
    IF ordered THEN
      SELECT id INTO h FROM sepp_jobs WHERE queue = q AND ckey = k AND waiting AND cordered ORDER BY id LIMIT 1 FOR UPDATE;
    END IF;
    IF h IS NULL THEN
      SELECT id INTO h FROM sepp_jobs WHERE queue = q AND ckey = k AND waiting AND NOT cordered
       ORDER BY priority DESC, run_at, id LIMIT 1 FOR UPDATE;
    END IF;
    IF h IS NULL AND NOT ordered THEN
      -- A key whose jobs were enqueued ordered before its queue changed.
      SELECT id INTO h FROM sepp_jobs WHERE queue = q AND ckey = k AND waiting AND cordered ORDER BY id LIMIT 1 FOR UPDATE;
    END IF;
    IF h IS NOT NULL THEN
      UPDATE sepp_jobs SET waiting = false, slot = true WHERE id = h;
      UPDATE sepp_concurrency SET waiting = waiting - 1 WHERE queue = q AND key = k;
      PERFORM pg_notify('sepp_jobs', q);
      RETURN;
    END IF;
  END IF;
  UPDATE sepp_concurrency SET active = active - 1 WHERE queue = q AND key = k;
  DELETE FROM sepp_concurrency WHERE queue = q AND key = k AND active <= 0 AND waiting <= 0;
END $$;

-- Every statement that changes a job's state, on any node, keeps the flow
-- state in the same transaction: a job that ends releases the follow-up
-- that waits for it (which, ordered, then arrives at its key) and frees its
-- slot; an unordered job leaving the reserved state frees its slot; a job
-- cancelled while it waits leaves its key's count (or its rate key's); an
-- ordered job made deliverable again (a requeue) arrives at its key.
CREATE FUNCTION sepp_job_state() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  ended boolean := NEW.state IN (4, 5, 6) AND OLD.state NOT IN (4, 5, 6);
  f record;
BEGIN
  IF ended AND NEW.flow & 1 <> 0 THEN
    UPDATE sepp_jobs SET follows = NULL WHERE follows = NEW.id AND state IN (1, 2)
     RETURNING id, queue, ckey, climit, cordered INTO f;
    IF FOUND THEN
      IF f.ckey IS NOT NULL AND f.cordered THEN
        IF sepp_arrive(f.queue, f.ckey, f.climit, true) THEN
          UPDATE sepp_jobs SET slot = true WHERE id = f.id;
        ELSE
          UPDATE sepp_jobs SET waiting = true WHERE id = f.id;
        END IF;
      END IF;
      PERFORM pg_notify('sepp_jobs', NEW.queue);
    END IF;
  END IF;
  IF NEW.rwaiting AND ended THEN
    NEW.rwaiting := false;
    UPDATE sepp_rate SET waiting = waiting - 1 WHERE queue = NEW.queue AND key = NEW.rkey;
  END IF;
  IF NEW.ckey IS NOT NULL THEN
    IF NEW.waiting AND ended THEN
      NEW.waiting := false;
      UPDATE sepp_concurrency SET waiting = waiting - 1 WHERE queue = NEW.queue AND key = NEW.ckey;
    ELSIF NEW.slot AND (ended OR (OLD.state = 3 AND NEW.state IN (1, 2) AND NOT NEW.cordered)) THEN
      NEW.slot := false;
      PERFORM sepp_release_slot(NEW.queue, NEW.ckey, NEW.cordered);
    ELSIF NEW.cordered AND NOT NEW.slot AND NOT NEW.waiting AND NEW.follows IS NULL
      AND OLD.state IN (4, 5, 6) AND NEW.state IN (1, 2) THEN
      IF sepp_arrive(NEW.queue, NEW.ckey, NEW.climit, true) THEN
        NEW.slot := true;
      ELSE
        NEW.waiting := true;
      END IF;
    END IF;
  END IF;
  RETURN NEW;
END $$;
-- The function runs only for the changes it acts on (not, say, for every
-- reserve of a job that holds a slot).
CREATE TRIGGER sepp_job_state BEFORE UPDATE OF state ON sepp_jobs FOR EACH ROW
  WHEN (OLD.state IS DISTINCT FROM NEW.state AND (
    (NEW.state IN (4, 5, 6) AND OLD.state NOT IN (4, 5, 6) AND (NEW.flow <> 0 OR NEW.slot OR NEW.waiting OR NEW.rwaiting))
    OR (OLD.state = 3 AND NEW.state IN (1, 2) AND NEW.slot AND NOT NEW.cordered)
    OR (OLD.state IN (4, 5, 6) AND NEW.state IN (1, 2) AND NEW.cordered AND NEW.ckey IS NOT NULL)))
  EXECUTE FUNCTION sepp_job_state();
