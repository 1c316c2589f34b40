-- Version 9: a running run names its lease owner by a number instead of
-- the owner's text. Every claim writes a new version of its run's row and
-- a runs_inflight entry, both with the owner; an owner is a UUID or a
-- descriptive id of 30-40 characters (host, pid, a random part), written
-- twice per claimed run, where a number takes 4 bytes. owners gives each
-- owner id that ever held a lease its number, once: numbers are never
-- reused, so a number in a row always means the owner that claimed it.
CREATE TABLE $S.owners (
    num   integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner text    NOT NULL UNIQUE
);
INSERT INTO $S.owners (owner) SELECT DISTINCT lease_owner FROM $S.runs WHERE lease_owner IS NOT NULL ORDER BY 1;
ALTER TABLE $S.runs ADD COLUMN lease_node integer;
UPDATE $S.runs r SET lease_node = o.num FROM $S.owners o WHERE o.owner = r.lease_owner;
DROP INDEX $S.runs_inflight;
ALTER TABLE $S.runs DROP COLUMN lease_owner;
CREATE INDEX runs_inflight ON $S.runs (lease_node, process) WHERE status IN ('idle', 'running');
