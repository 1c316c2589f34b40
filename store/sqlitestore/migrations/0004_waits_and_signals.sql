-- Version 4: waiting runs, waits and signals; run groups (singleton and
-- debounce admissions) and paused schedules.
--
-- A run whose attempt ended at a wait is 'waiting' until a signal, its
-- deadline (retry_at; NULL: none) or an operator ends the wait; wait_key
-- is the signal key it waits for (NULL for a sleep; NULL or '' for a run
-- that is not waiting: a claim marks the runs it took from waiting with
-- '', see claimSQL). The wait itself is an effect record in status
-- 'waiting'.
--
-- A CHECK constraint cannot be changed in place: runs and effects are
-- rebuilt with the new status allowed, as version 2 rebuilt runs (new
-- table, copy, drop, rename, indexes). Every column, in its order, and
-- every index is kept as it was; there are no triggers, views or foreign
-- keys to carry over.
--
-- group_key is the run's group (NewRun.GroupKey; NULL for none), fixed at
-- admission; runs of version 3 have none.
CREATE TABLE runs_v4 (
    seq            INTEGER PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    process        TEXT    NOT NULL,
    event          TEXT    NOT NULL,
    correlation_id TEXT,             -- NULL for a root run: its own id
    parent_id      TEXT,
    depth          INTEGER NOT NULL DEFAULT 0,
    status         TEXT    NOT NULL CHECK (status IN ('idle','running','waiting','completed','deferred','errored','dead-letter','fenced','cancelled')),
    payload        BLOB,
    context        BLOB,
    output         BLOB,
    error          TEXT    NOT NULL DEFAULT '',
    error_code     TEXT    NOT NULL DEFAULT '',
    then_event     TEXT    NOT NULL DEFAULT '',
    idem_key       TEXT,
    attempts       INTEGER NOT NULL DEFAULT 0,
    epoch          INTEGER NOT NULL DEFAULT 0,
    retry_at       INTEGER,
    lease_owner    TEXT,
    lease_expires  INTEGER,
    created_at     INTEGER NOT NULL,
    started_at     INTEGER,
    completed_at   INTEGER,
    version        TEXT    NOT NULL DEFAULT '',
    tl             INTEGER NOT NULL DEFAULT 1,
    priority       INTEGER NOT NULL DEFAULT 0,
    rate_key       TEXT,
    conc_key       TEXT,
    rate_tat       INTEGER,
    wait_key       TEXT,
    group_key      TEXT
);
INSERT INTO runs_v4 (seq, id, process, event, correlation_id, parent_id, depth, status, payload, context, output,
    error, error_code, then_event, idem_key, attempts, epoch, retry_at, lease_owner, lease_expires,
    created_at, started_at, completed_at, version, tl, priority, rate_key, conc_key, rate_tat)
SELECT seq, id, process, event, correlation_id, parent_id, depth, status, payload, context, output,
    error, error_code, then_event, idem_key, attempts, epoch, retry_at, lease_owner, lease_expires,
    created_at, started_at, completed_at, version, tl, priority, rate_key, conc_key, rate_tat
FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v4 RENAME TO runs;
-- The indexes of versions 1 and 3, unchanged (see 0001_init.sql for why
-- each).
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_process ON runs (process);
CREATE INDEX runs_event ON runs (event);
CREATE INDEX runs_correlation ON runs (correlation_id) WHERE correlation_id IS NOT NULL;
CREATE INDEX runs_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX runs_completed ON runs (completed_at) WHERE status = 'completed';
CREATE UNIQUE INDEX runs_idem ON runs (event, idem_key, process) WHERE idem_key IS NOT NULL;
CREATE INDEX runs_rate_tat ON runs (rate_tat) WHERE rate_tat IS NOT NULL;
-- Signal delivery: the runs waiting for a key, oldest (lowest seq) first;
-- like every secondary index it ends in the rowid, so it is (wait_key,
-- seq). Only runs that wait for a signal enter it, and only while they
-- wait.
CREATE INDEX runs_wait_key ON runs (wait_key) WHERE status = 'waiting' AND wait_key IS NOT NULL;
-- The dispatcher's index at start (Pending): waiting runs with a deadline,
-- by seq, merged with the idle runs of runs_status. A run waiting for a
-- signal without a deadline never enters it, however long it waits.
CREATE INDEX runs_wait_due ON runs (seq) WHERE status = 'waiting' AND retry_at IS NOT NULL;
-- A grouped admission's lookup: the latest admitted run of a process and
-- group key that is still to run, read from the end of (process,
-- group_key, seq). Runs without a group key never enter it, and a grouped
-- run leaves it when it ends, so it holds only the live runs of groups.
CREATE INDEX runs_group ON runs (process, group_key) WHERE group_key IS NOT NULL AND status IN ('idle', 'running', 'waiting');

CREATE TABLE effects_v4 (
    run_seq      INTEGER NOT NULL,
    key          TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('started','completed','failed','waiting')),
    epoch        INTEGER NOT NULL,
    output       BLOB,
    error        TEXT    NOT NULL DEFAULT '',
    started_at   INTEGER NOT NULL,
    completed_at INTEGER,
    PRIMARY KEY (run_seq, key)
) WITHOUT ROWID;
INSERT INTO effects_v4 (run_seq, key, status, epoch, output, error, started_at, completed_at)
SELECT run_seq, key, status, epoch, output, error, started_at, completed_at FROM effects;
DROP TABLE effects;
ALTER TABLE effects_v4 RENAME TO effects;

-- Signals no run waited for, kept for a later wait on their key until
-- keep_until; the oldest (lowest seq) is consumed first. Expired ones are
-- deleted by Prune (signals_keep_until).
CREATE TABLE signals (
    seq        INTEGER PRIMARY KEY,
    key        TEXT    NOT NULL,
    payload    BLOB,
    keep_until INTEGER NOT NULL
);
CREATE INDEX signals_key ON signals (key);
CREATE INDEX signals_keep_until ON signals (keep_until);

-- Paused schedules, by name, with the time of their first pause; a resume
-- deletes the row. Shared by every engine on the database, and kept
-- whether or not a schedule of that name is still declared.
CREATE TABLE paused_schedules (
    name      TEXT    PRIMARY KEY,
    paused_at INTEGER NOT NULL
);
