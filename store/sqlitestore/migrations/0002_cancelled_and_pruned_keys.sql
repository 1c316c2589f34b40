-- Version 2: the cancelled status, and idempotency keys that outlive their
-- runs.
--
-- A CHECK constraint cannot be changed in place: the runs table is rebuilt
-- with the new status allowed (SQLite's documented procedure: new table,
-- copy, drop, rename, indexes). There are no foreign keys to check.
CREATE TABLE runs_v2 (
    seq            INTEGER PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    process        TEXT    NOT NULL,
    event          TEXT    NOT NULL,
    correlation_id TEXT,             -- NULL for a root run: its own id
    parent_id      TEXT,
    depth          INTEGER NOT NULL DEFAULT 0,
    status         TEXT    NOT NULL CHECK (status IN ('idle','running','completed','deferred','errored','dead-letter','fenced','cancelled')),
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
    tl             INTEGER NOT NULL DEFAULT 1
);
INSERT INTO runs_v2 SELECT * FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v2 RENAME TO runs;
-- The indexes of version 1, unchanged (see 0001_init.sql for why each).
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_process ON runs (process);
CREATE INDEX runs_event ON runs (event);
CREATE INDEX runs_correlation ON runs (correlation_id) WHERE correlation_id IS NOT NULL;
CREATE INDEX runs_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX runs_completed ON runs (completed_at) WHERE status = 'completed';
CREATE UNIQUE INDEX runs_idem ON runs (event, idem_key, process) WHERE idem_key IS NOT NULL;

-- The idempotency key of a run that retention pruned: kept, so that a
-- sender retrying days later is not processed twice, until the key's own
-- retention has passed since the run's admission (created_at). A live
-- run's key is its runs.idem_key (runs_idem); it moves here in the
-- transaction that prunes the run, so admissions pay nothing for it.
CREATE TABLE pruned_keys (
    event      TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    process    TEXT    NOT NULL,
    run_id     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (event, key, process)
) WITHOUT ROWID;
CREATE INDEX pruned_keys_created ON pruned_keys (created_at);
