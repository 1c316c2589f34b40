-- Version 3: run ids are looked up in a table of their own, written once
-- when a run is admitted and deleted with it, instead of a unique index on
-- runs. Every claim and attempt end writes a new version of its run's row,
-- and an index entry in every index of runs for it; an index on the random
-- run ids took most of those statements' time (its entries land on a
-- different page each), while the other indexes of runs are keyed by
-- values that cluster. Ids stay unique: this table's primary key refuses a
-- second run with an id, as the unique constraint did.
CREATE TABLE $S.run_ids (
    id  text   PRIMARY KEY,
    seq bigint NOT NULL
);
INSERT INTO $S.run_ids (id, seq) SELECT id, seq FROM $S.runs;
ALTER TABLE $S.runs DROP CONSTRAINT runs_id_key;
