-- Version 5: waits and signals; run groups and paused schedules (below).
-- An attempt may end waiting (status 'waiting'): for a signal (wait_key,
-- the signal's key), until a deadline (retry_at), or both. Its wait is an
-- effect record in status 'waiting' until a signal completes it. wait_key
-- is NULL unless the run waits for a signal: rows of other runs do not
-- grow.
ALTER TABLE $S.runs DROP CONSTRAINT runs_status_check;
ALTER TABLE $S.runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('idle','running','waiting','completed','deferred','errored','dead-letter','fenced','cancelled'));
ALTER TABLE $S.runs ADD COLUMN wait_key text;
ALTER TABLE $S.effects DROP CONSTRAINT effects_status_check;
ALTER TABLE $S.effects ADD CONSTRAINT effects_status_check CHECK (status IN ('started','completed','failed','waiting'));

-- The runs waiting for each signal key, the one admitted first first (a
-- signal wakes it); and the waiting runs with a deadline, by deadline
-- (claims make the due ones idle, and report the next one). Both hold
-- waiting runs only, and stay as small as the waits in progress.
CREATE INDEX runs_wait_key ON $S.runs (wait_key, seq) WHERE status = 'waiting';
CREATE INDEX runs_wait_due ON $S.runs (retry_at) WHERE status = 'waiting' AND retry_at IS NOT NULL;

-- Signals no run waited for, kept for the next wait for their key until
-- keep_until (Unix nanoseconds): the oldest first (seq). Retention deletes
-- the expired ones (by keep_until).
CREATE TABLE $S.signals (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        text   NOT NULL,
    payload    bytea,
    keep_until bigint NOT NULL
);
CREATE INDEX signals_key ON $S.signals (key, seq);
CREATE INDEX signals_keep_until ON $S.signals (keep_until);

-- Groups (NewRun.GroupKey): a run's group key, NULL for none, fixed at
-- admission. A Singleton or Debounce admission looks up the latest run of
-- its process and key still to run (runs_group: backwards from the
-- highest seq); it holds grouped runs that are idle, running or waiting
-- only, so rows without a key, and ended runs, take no entry.
ALTER TABLE $S.runs ADD COLUMN group_key text;
CREATE INDEX runs_group ON $S.runs (process, group_key, seq)
    WHERE group_key IS NOT NULL AND status IN ('idle','running','waiting');

-- Paused schedules, by name, with the time of their first pause (Unix
-- nanoseconds, the engine's clock): the engines' shared memory of a
-- pause, which outlives them and the schedule's declaration.
CREATE TABLE $S.paused_schedules (
    name      text   PRIMARY KEY,
    paused_at bigint NOT NULL
);
