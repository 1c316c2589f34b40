-- Version 7: the status index holds the runs that are not completed, and
-- the index of completed runs by completion time is gone. A completion
-- moved its run's entry in runs_status from running to completed, where
-- only the counts read it, and added one to runs_completed, which only
-- retention read; a completion now deletes one index entry and writes none
-- (BenchmarkEndToEnd/sqlite: +5% median in 5 alternating pairs, -1% to
-- +22% on a noisy host; dropping the completed index alone was +5 to +6%
-- in 4 pairs, the partial status index +2 to +3%). Completed runs
-- are most of the table: they are read in seq order (the rowid), which
-- listings and retention both use (Store.Prune), and counted as the rows
-- the status index does not hold. A query reads runs_status only if it
-- states the index's condition (status <> 'completed'), as SQLite asks
-- of a partial index.
DROP INDEX runs_completed;
DROP INDEX runs_status;
CREATE INDEX runs_status ON runs (status) WHERE status <> 'completed';
