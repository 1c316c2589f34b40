-- Runs: one narrow row per run. The timeline is appended to its own table,
-- never rewritten as a blob. Times are Unix nanoseconds.
CREATE TABLE runs (
    seq            INTEGER PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    process        TEXT    NOT NULL,
    event          TEXT    NOT NULL,
    correlation_id TEXT    NOT NULL,
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
    tl             INTEGER NOT NULL DEFAULT 0  -- timeline entries so far
);
-- Every index below serves a query of the API or the dashboard. Secondary
-- indexes end in the rowid (seq), so "WHERE status = ? ORDER BY seq" pages
-- without sorting.
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_process_status ON runs (process, status);
CREATE INDEX runs_event ON runs (event);
CREATE INDEX runs_correlation ON runs (correlation_id);
CREATE INDEX runs_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX runs_completed ON runs (completed_at) WHERE status = 'completed';
CREATE INDEX runs_lease ON runs (lease_expires) WHERE status = 'running';
CREATE UNIQUE INDEX runs_idem ON runs (event, idem_key, process) WHERE idem_key IS NOT NULL;

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
