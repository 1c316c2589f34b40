-- Version 1. Every table lives in the store's schema ($S), so several
-- stores (or tests) share one database without seeing each other. Times
-- the engine gives are Unix nanoseconds (bigint), exact to the nanosecond
-- as the contract needs; times of the node table come from the database's
-- clock (timestamptz, now()). JSON is kept as the exact bytes given.

-- Runs: one row per run. Every transition writes a new row version, and a
-- version whose indexed columns change (the status, in the partial indexes'
-- predicates) is written to every index; so the table has few indexes, and
-- most are partial: the in-flight ones hold only idle or running runs and
-- stay small however large the history grows. Heartbeats and context
-- writes change no indexed column: with free space left in each page
-- (fillfactor) they are HOT updates, which write no index at all.
CREATE TABLE $S.runs (
    seq            bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id             text    NOT NULL UNIQUE,
    process        text    NOT NULL,
    event          text    NOT NULL,
    correlation_id text,             -- NULL for a root run: its own id
    parent_id      text,
    depth          integer NOT NULL DEFAULT 0,
    status         text    NOT NULL CHECK (status IN ('idle','running','completed','deferred','errored','dead-letter','fenced','cancelled')),
    payload        bytea,
    context        bytea,
    output         bytea,
    error          text    NOT NULL DEFAULT '',
    error_code     text    NOT NULL DEFAULT '',
    then_event     text    NOT NULL DEFAULT '',
    idem_key       text,
    attempts       integer NOT NULL DEFAULT 0,
    epoch          bigint  NOT NULL DEFAULT 0,
    retry_at       bigint,
    lease_owner    text,
    lease_expires  bigint,
    created_at     bigint  NOT NULL,
    started_at     bigint,
    completed_at   bigint,
    version        text    NOT NULL DEFAULT '',
    tl             integer NOT NULL DEFAULT 1  -- timeline entries so far, counting the implicit ones
) WITH (fillfactor = 80);

-- In flight: the claim's order (idle by seq), delayed retries, the leases
-- of each owner (heartbeats, reclaims) and the active runs of each process
-- (caps).
CREATE INDEX runs_idle ON $S.runs (seq) WHERE status = 'idle';
CREATE INDEX runs_delayed ON $S.runs (retry_at) WHERE status = 'idle' AND retry_at IS NOT NULL;
CREATE INDEX runs_running ON $S.runs (lease_owner) WHERE status = 'running';
CREATE INDEX runs_active ON $S.runs (process) WHERE status IN ('idle', 'running');
-- Listings and retention. Final runs other than completed ones are rare:
-- their own partial index lists them by status; completed runs are most of
-- the table and are listed from the primary key (filtered by process or
-- event: an index on those would take an entry per row version, three per
-- run, for listings alone).
CREATE INDEX runs_settled ON $S.runs (status, seq) WHERE status NOT IN ('idle', 'running', 'completed');
CREATE INDEX runs_completed ON $S.runs (completed_at) WHERE status = 'completed';
CREATE INDEX runs_correlation ON $S.runs (correlation_id) WHERE correlation_id IS NOT NULL;
CREATE INDEX runs_parent ON $S.runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE UNIQUE INDEX runs_idem ON $S.runs (event, idem_key, process) WHERE idem_key IS NOT NULL;

-- Timeline entries. Two are implicit, to write less per run: entry 1
-- (admitted) is read from runs.created_at, and the running entry of the
-- attempt in progress from runs.started_at; it is written, with the entry
-- that ends the attempt, when the attempt ends.
CREATE TABLE $S.timeline (
    run_seq bigint  NOT NULL,
    n       integer NOT NULL,
    at      bigint  NOT NULL,
    status  text    NOT NULL,
    attempt integer NOT NULL,
    error   text    NOT NULL DEFAULT '',
    code    text    NOT NULL DEFAULT '',
    note    text    NOT NULL DEFAULT '',
    PRIMARY KEY (run_seq, n)
);

CREATE TABLE $S.effects (
    run_seq      bigint NOT NULL,
    key          text   NOT NULL,
    status       text   NOT NULL CHECK (status IN ('started','completed','failed')),
    epoch        bigint NOT NULL,
    output       bytea,
    error        text   NOT NULL DEFAULT '',
    started_at   bigint NOT NULL,
    completed_at bigint,
    PRIMARY KEY (run_seq, key)
) WITH (fillfactor = 80);

-- The idempotency key of a run that retention pruned, kept until the key's
-- own retention has passed since the run's admission.
CREATE TABLE $S.pruned_keys (
    event      text   NOT NULL,
    key        text   NOT NULL,
    process    text   NOT NULL,
    run_id     text   NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (event, key, process)
);
CREATE INDEX pruned_keys_created ON $S.pruned_keys (created_at);

-- Runs per status, as deltas summed when read: each writer adds its
-- batch's changes to a row of its own shard, so writers (and nodes) never
-- wait on one hot row, and reading the counts does not scan the runs.
CREATE TABLE $S.counts (
    shard  integer NOT NULL,
    status text    NOT NULL,
    n      bigint  NOT NULL,
    PRIMARY KEY (shard, status)
);

-- Observability: one row per flush of a closed bucket and process.
CREATE TABLE $S.rollups (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    bucket  bigint NOT NULL,
    process text   NOT NULL,
    counts  bytea  NOT NULL,
    hists   bytea
);
CREATE INDEX rollups_bucket ON $S.rollups (bucket);

CREATE TABLE $S.errors (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         bigint NOT NULL,
    kind       text   NOT NULL,
    process    text   NOT NULL DEFAULT '',
    run_id     text   NOT NULL DEFAULT '',
    effect_key text   NOT NULL DEFAULT '',
    context    text   NOT NULL DEFAULT '',
    message    text   NOT NULL
);
CREATE INDEX errors_at ON $S.errors (at);

-- Nodes: the engine processes sharing the schema, with their heartbeats on
-- the database's clock. gone is set once by whichever node first finds a
-- node's heartbeat too old, which then tells every node (NOTIFY) to take
-- the runs it held; a node that comes back clears it.
CREATE TABLE $S.nodes (
    owner     text        PRIMARY KEY,
    joined_at timestamptz NOT NULL DEFAULT now(),
    seen      timestamptz NOT NULL DEFAULT now(),
    gone      boolean     NOT NULL DEFAULT false
);
