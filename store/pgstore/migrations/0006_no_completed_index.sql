-- Version 6: the index of completed runs by completion time is gone. Every
-- completion wrote an entry in it (a completion is never a HOT update: its
-- status is in the partial indexes' conditions), and only retention read
-- it. Retention now reads the runs in seq order, the primary key, a
-- bounded window per call (Store.Prune).
DROP INDEX $S.runs_completed;
