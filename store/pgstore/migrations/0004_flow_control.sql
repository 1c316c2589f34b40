-- Version 4: flow control. A run's priority and the keys of the rate limit
-- and the per-key concurrency limit it counts against are fixed at
-- admission; rate_tat is its rate key's theoretical arrival time as of its
-- latest claim. A key's state is the largest rate_tat of its runs (the
-- time only grows), so every node reads it from the runs, and a restarted
-- engine resumes its rate limits from them: no table of its own and no
-- extra row written per claim. The columns are NULL for a run without
-- flow control (priority 0 included): a NULL costs a bit of the row's null
-- bitmap, which runs already have, so rows of unlimited runs do not grow.
ALTER TABLE $S.runs ADD COLUMN priority integer;
ALTER TABLE $S.runs ADD COLUMN rate_key text;
ALTER TABLE $S.runs ADD COLUMN conc_key text;
ALTER TABLE $S.runs ADD COLUMN rate_tat bigint;

-- The claim's order: idle runs by rank (the admission time, moved earlier
-- by PriorityStep, one minute, per level of priority), then seq. The rank
-- is an expression of the row, not a column: nothing is stored for it and
-- no row is rewritten by this migration. Claims order by the same
-- expression (rankExpr in sql.go).
DROP INDEX $S.runs_idle;
CREATE INDEX runs_idle ON $S.runs ((created_at - coalesce(priority, 0)::bigint * 60000000000), seq) WHERE status = 'idle';

-- The limited paths. Running runs per concurrency key (counted under the
-- key's lock); the rate keys' states: the future theoretical arrival
-- times (rate_tat > now); and idle runs by rate key (whether a key that
-- holds back a start has a run waiting for it: the claim's NextAt). Runs
-- without keys have no entry in any of them.
CREATE INDEX runs_conc ON $S.runs (conc_key) WHERE status = 'running' AND conc_key IS NOT NULL;
CREATE INDEX runs_rate_tat ON $S.runs (rate_tat) WHERE rate_tat IS NOT NULL;
CREATE INDEX runs_rate_idle ON $S.runs (rate_key) WHERE status = 'idle' AND rate_key IS NOT NULL;
