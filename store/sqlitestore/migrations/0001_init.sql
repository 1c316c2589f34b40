-- Runs: one narrow row per run. The timeline is appended to its own table,
-- never rewritten as a blob. Times are Unix nanoseconds.
CREATE TABLE runs (
    seq            INTEGER PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    process        TEXT    NOT NULL,
    event          TEXT    NOT NULL,
    correlation_id TEXT,             -- NULL for a root run: its own id
    parent_id      TEXT,
    depth          INTEGER NOT NULL DEFAULT 0,
    status         TEXT    NOT NULL CHECK (status IN ('idle','running','completed','deferred','errored','dead-letter','fenced')),
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
    tl             INTEGER NOT NULL DEFAULT 1  -- timeline entries so far, counting the implicit ones
);
-- Every index below serves a query of the API or the dashboard, and each
-- is chosen to cost little per run: secondary indexes end in the rowid
-- (seq), so "WHERE x = ? ORDER BY seq" pages without sorting; the process
-- and event of a run never change, so those indexes are written once; a
-- root run's correlation id is its own id and is stored as NULL, so only
-- follow-up runs enter the correlation index.
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_process ON runs (process);
CREATE INDEX runs_event ON runs (event);
CREATE INDEX runs_correlation ON runs (correlation_id) WHERE correlation_id IS NOT NULL;
CREATE INDEX runs_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX runs_completed ON runs (completed_at) WHERE status = 'completed';
CREATE UNIQUE INDEX runs_idem ON runs (event, idem_key, process) WHERE idem_key IS NOT NULL;

-- Timeline entries. Two are implicit, to write less per run: entry 1
-- (admitted) is read from runs.created_at, and the running entry of the
-- attempt in progress from runs.started_at; it is written, with the entry
-- that ends the attempt, when the attempt ends.
CREATE TABLE timeline (
    run_seq INTEGER NOT NULL,
    n       INTEGER NOT NULL,
    at      INTEGER NOT NULL,
    status  TEXT    NOT NULL,
    attempt INTEGER NOT NULL,
    error   TEXT    NOT NULL DEFAULT '',
    code    TEXT    NOT NULL DEFAULT '',
    note    TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (run_seq, n)
) WITHOUT ROWID;

CREATE TABLE effects (
    run_seq      INTEGER NOT NULL,
    key          TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('started','completed','failed')),
    epoch        INTEGER NOT NULL,
    output       BLOB,
    error        TEXT    NOT NULL DEFAULT '',
    started_at   INTEGER NOT NULL,
    completed_at INTEGER,
    PRIMARY KEY (run_seq, key)
) WITHOUT ROWID;

-- Observability: one row per flush of a closed bucket and process; counters
-- and encoded sketches as JSON. Rows of one bucket are merged when read.
CREATE TABLE rollups (
    id      INTEGER PRIMARY KEY,
    bucket  INTEGER NOT NULL,
    process TEXT    NOT NULL,
    counts  BLOB    NOT NULL,
    hists   BLOB
);
CREATE INDEX rollups_bucket ON rollups (bucket);

CREATE TABLE errors (
    id         INTEGER PRIMARY KEY,
    at         INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    process    TEXT    NOT NULL DEFAULT '',
    run_id     TEXT    NOT NULL DEFAULT '',
    effect_key TEXT    NOT NULL DEFAULT '',
    context    TEXT    NOT NULL DEFAULT '',
    message    TEXT    NOT NULL
);
CREATE INDEX errors_at ON errors (at);
