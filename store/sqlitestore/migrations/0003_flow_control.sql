-- Version 3: flow control. A run's priority and the keys of the rate limit
-- and the per-key concurrency limit it counts against are fixed at
-- admission; rate_tat is its rate key's theoretical arrival time as of its
-- latest claim. A key's state is the largest rate_tat of its runs (the
-- time only grows), so a restarted engine resumes its rate limits from
-- the runs, with no table of its own and no extra row written per claim.
-- Columns left at their defaults cost no bytes in a row: 0 and NULL are
-- stored in the record header alone.
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN rate_key TEXT;
ALTER TABLE runs ADD COLUMN conc_key TEXT;
ALTER TABLE runs ADD COLUMN rate_tat INTEGER;
CREATE INDEX runs_rate_tat ON runs (rate_tat) WHERE rate_tat IS NOT NULL;
