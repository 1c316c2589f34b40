-- Version 7: a follow-up run's correlation and parent ids are indexed in
-- run_ids, written once when the run is admitted and never updated,
-- instead of in indexes of runs. A run's row gets a new version at its
-- claim and at its attempt's end, never a HOT update (the status is in
-- the partial indexes' conditions), so each index of runs took an entry
-- for every version: a follow-up run paid two entries at each of its
-- transitions for reads only chain listings and retention make. runs
-- keeps both columns, which a run reads back with.
ALTER TABLE $S.run_ids ADD COLUMN correlation_id text, ADD COLUMN parent_id text;
UPDATE $S.run_ids m SET correlation_id = r.correlation_id, parent_id = r.parent_id
    FROM $S.runs r WHERE r.seq = m.seq AND (r.correlation_id IS NOT NULL OR r.parent_id IS NOT NULL);
CREATE INDEX run_ids_correlation ON $S.run_ids (correlation_id) WHERE correlation_id IS NOT NULL;
CREATE INDEX run_ids_parent ON $S.run_ids (parent_id) WHERE parent_id IS NOT NULL;
DROP INDEX $S.runs_correlation;
DROP INDEX $S.runs_parent;
