package main

import (
	"strings"
	"sync/atomic"
)

// A DIAGNOSTIC, not a floor and not an engine: the floor's no-op work
// (floor_sqlite.go), its statements and its writer unchanged, on the
// engine's runs table (its columns and its indexes, created by the
// engine's store) instead of the floor's one-index table. The distance
// from the floor to it is what the engine's schema costs before any engine
// code runs; the distance from it to the engine is the engine's own work.
// The second form returns the whole run from each update, as the engine's
// claims and attempt ends do (without decoding it).
func init() {
	measurements = append(measurements,
		measurement{"schema-noop-batch", "DIAGNOSTIC (not an engine): the floor's no-op work on the engine's runs table and indexes", "runs/s", "—",
			func(c childConfig) (result, error) { return floorOnEngineSchema(c.DB, false) }},
		measurement{"schema-ret-noop-batch", "DIAGNOSTIC: as schema-noop-batch, each update returning the run's columns as the engine's do", "runs/s", "—",
			func(c childConfig) (result, error) { return floorOnEngineSchema(c.DB, true) }},
	)
	floorFor["schema-noop-batch"] = "floor-noop-batch"
	floorFor["schema-ret-noop-batch"] = "floor-noop-batch"
}

// engineRunCols are the columns the engine's attempt ends return.
const engineRunCols = "seq, id, process, event, correlation_id, parent_id, depth, status, output, error, error_code, then_event, idem_key, " +
	"attempts, epoch, retry_at, lease_owner, lease_expires, created_at, started_at, completed_at, version, tl, priority, rate_key, conc_key"

// floorOnEngineSchema runs the floor's no-op batch workload (20,000 runs,
// 500-row inserts, 50 workers) on a database whose schema the engine's
// store created.
func floorOnEngineSchema(path string, returning bool) (result, error) {
	st, err := openSQLite(path) // creates the engine's schema
	if err != nil {
		return result{}, err
	}
	if err := st.Close(); err != nil {
		return result{}, err
	}
	ret := ""
	if returning {
		ret = " RETURNING " + engineRunCols
	}
	var seq atomic.Int64 // the engine's runs take their seq from the writer
	t := floorTable{
		insert: func(ids []string, event string, now int64) stmt {
			q := "INSERT INTO runs (seq, id, process, event, status, payload, created_at) VALUES " +
				strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, 'idle', ?, ?),", len(ids)), ",")
			args := make([]any, 0, 6*len(ids))
			for _, id := range ids {
				args = append(args, seq.Add(1), id, event, event, payload100(id), now)
			}
			return stmt{q, args}
		},
		claim:    "UPDATE runs SET status = 'running', lease_owner = 'floor', epoch = epoch + 1, attempts = attempts + 1, started_at = ? WHERE id = ? AND status = 'idle'" + ret,
		complete: "UPDATE runs SET status = 'completed', output = ?, completed_at = ?, lease_owner = NULL, tl = tl + 2 WHERE id = ? AND status = 'running' AND epoch = 1" + ret,
	}
	return runFloor(path, t, "noop", "batch", nRuns)
}
