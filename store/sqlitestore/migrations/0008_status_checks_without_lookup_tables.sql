-- Version 8: the status CHECK constraints of runs and effects are written
-- as chains of equality tests instead of IN lists. Both allow the very
-- same statuses; what changes is the cost of checking them. SQLite turns
-- an IN list of more than two constants into a temporary b-tree that it
-- builds every time a statement runs, so each single-run admission,
-- claim, attempt end and effect record that wrote a status allocated,
-- filled and freed one (an EXPLAIN of such an UPDATE shows its
-- OpenEphemeral). An equality chain compares in place; the statuses most
-- runs are written with come first. Measured with the store's own
-- benchmarks, 5 alternating pairs each: BenchmarkStoreAdmit -17%
-- (median ns/op), BenchmarkStoreLifecycle -12%, a single attempt end
-- (BenchmarkAttemptEnds/alone) -10%.
--
-- A CHECK constraint cannot be changed in place: runs and effects are
-- rebuilt as versions 2 and 4 rebuilt them (new table, copy, drop,
-- rename, indexes). Every column, in its order, and every index of
-- version 7 is kept as it was; there are no triggers, views or foreign
-- keys to carry over. The copy is paid once, at the first read-write open
-- by this version: 11 s for a file of a million runs and half a million
-- effect records (241 MB) on the machine of the figures above; the old
-- tables' pages stay in the file as free pages, which later writes reuse.
CREATE TABLE runs_v8 (
    seq            INTEGER PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    process        TEXT    NOT NULL,
    event          TEXT    NOT NULL,
    correlation_id TEXT,             -- NULL for a root run: its own id
    parent_id      TEXT,
    depth          INTEGER NOT NULL DEFAULT 0,
    status         TEXT    NOT NULL CHECK (status = 'running' OR status = 'completed' OR status = 'idle' OR status = 'waiting'
                                           OR status = 'deferred' OR status = 'errored' OR status = 'dead-letter'
                                           OR status = 'fenced' OR status = 'cancelled'),
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
INSERT INTO runs_v8 (seq, id, process, event, correlation_id, parent_id, depth, status, payload, context, output,
    error, error_code, then_event, idem_key, attempts, epoch, retry_at, lease_owner, lease_expires,
    created_at, started_at, completed_at, version, tl, priority, rate_key, conc_key, rate_tat, wait_key, group_key)
SELECT seq, id, process, event, correlation_id, parent_id, depth, status, payload, context, output,
    error, error_code, then_event, idem_key, attempts, epoch, retry_at, lease_owner, lease_expires,
    created_at, started_at, completed_at, version, tl, priority, rate_key, conc_key, rate_tat, wait_key, group_key
FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v8 RENAME TO runs;
-- The indexes of version 7, unchanged (see the earlier versions for why
-- each).
CREATE INDEX runs_correlation ON runs (correlation_id) WHERE correlation_id IS NOT NULL;
CREATE INDEX runs_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE UNIQUE INDEX runs_idem ON runs (event, idem_key, process) WHERE idem_key IS NOT NULL;
CREATE INDEX runs_rate_tat ON runs (rate_tat) WHERE rate_tat IS NOT NULL;
CREATE INDEX runs_wait_key ON runs (wait_key) WHERE status = 'waiting' AND wait_key IS NOT NULL;
CREATE INDEX runs_wait_due ON runs (seq) WHERE status = 'waiting' AND retry_at IS NOT NULL;
CREATE INDEX runs_group ON runs (process, group_key) WHERE group_key IS NOT NULL AND status IN ('idle', 'running', 'waiting');
CREATE INDEX runs_status ON runs (status) WHERE status <> 'completed';

CREATE TABLE effects_v8 (
    run_seq      INTEGER NOT NULL,
    key          TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status = 'started' OR status = 'completed' OR status = 'waiting' OR status = 'failed'),
    epoch        INTEGER NOT NULL,
    output       BLOB,
    error        TEXT    NOT NULL DEFAULT '',
    started_at   INTEGER NOT NULL,
    completed_at INTEGER,
    PRIMARY KEY (run_seq, key)
) WITHOUT ROWID;
INSERT INTO effects_v8 (run_seq, key, status, epoch, output, error, started_at, completed_at)
SELECT run_seq, key, status, epoch, output, error, started_at, completed_at FROM effects;
DROP TABLE effects;
ALTER TABLE effects_v8 RENAME TO effects;
