-- Version 8: one index of the in-flight runs instead of two. A claim
-- writes a new version of its run's row, never a HOT update (the status
-- is in the partial indexes' conditions), and so an entry in every index
-- whose condition the running run meets: runs_running (by lease owner)
-- and runs_active (by process, idle or running) took one each. The one
-- index left serves both: a running run is found by its lease owner
-- (heartbeats, reclaims, the nodes' holdings) and the running runs of a
-- process among the entries with an owner; an idle run has no lease, so
-- the idle runs of a process are the entries with no owner and that
-- process.
UPDATE $S.runs SET lease_owner = NULL WHERE status = 'idle' AND lease_owner IS NOT NULL;
CREATE INDEX runs_inflight ON $S.runs (lease_owner, process) WHERE status IN ('idle', 'running');
DROP INDEX $S.runs_running;
DROP INDEX $S.runs_active;
