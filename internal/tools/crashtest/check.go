package crashtest

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	_ "modernc.org/sqlite" // the driver the store uses
)

// Report is the result of checking a database after crashes.
type Report struct {
	Acked          int      // distinct admissions acknowledged to the admitter
	Runs           int      // runs in the database
	Roots          int      // of those, root runs (admitted by an emission)
	Completed      int      // runs completed
	Fenced         int      // runs fenced (an effect of unknown outcome)
	Unresolved     int      // runs that ended errored or dead holding a started effect (see Check)
	Executions     int      // effect body executions in the witness
	Lost           []string // acknowledged keys with no run
	Unexpected     []string // runs whose key was never attempted
	NotTerminal    []string // runs still idle or running
	CompletedTwice []string // runs with more than one completion
	EffectReruns   []string // effect bodies that ran again after completing or being cut off
	BadFences      []string // fenced runs without a started effect, or completed runs with one
	// MissingFollowUps are completed runs that name a follow-up event but
	// have no follow-up run: the completion and the admission of its
	// follow-ups are one transaction, so a crash cannot split them. (A
	// follow-up that no listener admitted ends its parent errored with
	// NOT_ADMITTED instead, naming no follow-up.)
	MissingFollowUps []string
	// DoubledFollowUps are runs with two follow-ups of the same process.
	DoubledFollowUps []string
	Integrity        string // PRAGMA integrity_check
}

// OK reports whether every invariant holds.
func (r Report) OK() bool { return len(r.Failures()) == 0 }

// Failures lists the broken invariants.
func (r Report) Failures() []string {
	var out []string
	add := func(what string, ids []string) {
		if len(ids) > 0 {
			out = append(out, fmt.Sprintf("%s: %d (%s)", what, len(ids), strings.Join(first(ids, 5), ", ")))
		}
	}
	add("acknowledged admissions lost", r.Lost)
	add("runs never attempted", r.Unexpected)
	add("runs not terminal", r.NotTerminal)
	add("runs completed twice", r.CompletedTwice)
	add("completed effects run twice", r.EffectReruns)
	add("fencing inconsistent", r.BadFences)
	add("completed runs without their follow-up", r.MissingFollowUps)
	add("follow-ups admitted twice", r.DoubledFollowUps)
	if r.Integrity != "ok" {
		out = append(out, "integrity_check: "+r.Integrity)
	}
	return out
}

func (r Report) String() string {
	return fmt.Sprintf("%d acked, %d runs (%d completed, %d fenced, %d failed holding a started effect), %d effect executions, integrity %s",
		r.Acked, r.Runs, r.Completed, r.Fenced, r.Unresolved, r.Executions, r.Integrity)
}

func first(ids []string, n int) []string {
	if len(ids) > n {
		return append(ids[:n:n], "…")
	}
	return ids
}

// Check verifies the invariants of a database after crashes, against the
// acknowledged admissions (one idempotency key per line) and the witness.
// Root runs whose idempotency key lacks keyPrefix count as unexpected.
//
// A started effect (its attempt was cut off by a kill) must leave its run
// fenced, with one exception, counted as Unresolved and not a violation:
// the run ended errored or dead before any later attempt reached the
// effect (that attempt failed for another reason first, or the retry
// budget ran out at the reclaim). Its body still ran at most once; an
// operator's retry would reach the effect and be fenced. A completed run
// holding a started effect is a violation: in the workloads these tests
// run, every path to completion passes each of the run's effects.
func Check(dbPath, witnessPath, acksPath, keyPrefix string) (Report, error) {
	r, acked, execs, err := readInputs(witnessPath, acksPath)
	if err != nil {
		return r, err
	}
	db, ok, err := openSchema(dbPath)
	if err != nil {
		return r, err
	}
	if !ok { // killed before its schema was committed: nothing was admitted
		r.Integrity = "ok"
		r.Lost = append(r.Lost, acked...)
		return r, nil
	}
	defer db.Close()
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&r.Integrity); err != nil {
		return r, err
	}
	return checkDB(db, r, acked, execs, keyPrefix)
}

// CheckDB is Check on an open database of another store with the same
// tables and columns (runs, timeline, effects): the PostgreSQL store's,
// with its schema on the search path. Such a database has no integrity
// pragma: its server checks itself, and Integrity is reported "ok".
func CheckDB(db *sql.DB, witnessPath, acksPath, keyPrefix string) (Report, error) {
	r, acked, execs, err := readInputs(witnessPath, acksPath)
	if err != nil {
		return r, err
	}
	r.Integrity = "ok"
	return checkDB(db, r, acked, execs, keyPrefix)
}

// checkDB checks the invariants on db (see Check).
func checkDB(db *sql.DB, r Report, acked []string, execs map[string]int, keyPrefix string) (Report, error) {
	status, byKey, err := checkRuns(db, &r, keyPrefix)
	if err != nil {
		return r, err
	}
	for _, k := range acked {
		if !byKey[k] {
			r.Lost = append(r.Lost, k)
		}
	}
	if err := checkCompletions(db, &r); err != nil {
		return r, err
	}
	if err := checkFollowUps(db, &r); err != nil {
		return r, err
	}
	err = checkEffects(db, &r, execs, status)
	sort.Strings(r.BadFences)
	return r, err
}

// readInputs reads the acknowledged keys and the witness's effect body
// executions.
func readInputs(witnessPath, acksPath string) (r Report, acked []string, execs map[string]int, err error) {
	acked, err = ReadLines(acksPath)
	if err != nil {
		return r, nil, nil, err
	}
	distinct := map[string]bool{}
	for _, k := range acked {
		distinct[k] = true
	}
	r.Acked = len(distinct)
	execs, err = readWitness(witnessPath, &r)
	return r, acked, execs, err
}

// readWitness counts the effect body executions in the witness, by run
// and effect key ("run/key").
func readWitness(path string, r *Report) (map[string]int, error) {
	execs := map[string]int{}
	witness, err := ReadLines(path)
	if err != nil {
		return nil, err
	}
	for _, l := range witness {
		var w WitnessLine
		if err := json.Unmarshal([]byte(l), &w); err != nil {
			return nil, fmt.Errorf("witness line %q: %w", l, err)
		}
		execs[w.Run+"/"+w.Key]++
		r.Executions++
	}
	return execs, nil
}

// checkRuns counts the runs by status, finds those not terminal, fenced
// with the wrong code or admitted under a key never attempted, and returns
// every run's status and the idempotency keys present.
func checkRuns(db *sql.DB, r *Report, keyPrefix string) (status map[string]string, byKey map[string]bool, err error) {
	rows, err := db.Query("SELECT id, coalesce(idem_key, ''), status, error_code, parent_id IS NULL FROM runs")
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	status, byKey = map[string]string{}, map[string]bool{}
	for rows.Next() {
		var id, key, st, code string
		var root bool
		if err := rows.Scan(&id, &key, &st, &code, &root); err != nil {
			return nil, nil, err
		}
		r.Runs++
		if root {
			r.Roots++
		}
		status[id] = st
		byKey[key] = true
		if key != "" && !strings.HasPrefix(key, keyPrefix) {
			r.Unexpected = append(r.Unexpected, id)
		}
		switch st {
		case "idle", "running":
			r.NotTerminal = append(r.NotTerminal, id)
		case "completed":
			r.Completed++
		case "fenced":
			r.Fenced++
			if code != "EFFECT_FENCED" {
				r.BadFences = append(r.BadFences, id+" fenced with code "+code)
			}
		}
	}
	return status, byKey, nil
}

// CompletedTwiceSQL selects the ids of the runs whose timeline completes
// them more than once: its completed rows, and the implicit completion of
// a run that its first attempt completed (completed, tl = 3, and no row
// for entries 2 and 3: the stores read those entries from the run's row).
const CompletedTwiceSQL = `SELECT r.id FROM runs r
	WHERE (SELECT count(*) FROM timeline t WHERE t.run_seq = r.seq AND t.status = 'completed')
		+ CASE WHEN r.status = 'completed' AND r.tl = 3
			AND NOT EXISTS (SELECT 1 FROM timeline t WHERE t.run_seq = r.seq AND t.n IN (2, 3)) THEN 1 ELSE 0 END > 1`

// checkCompletions finds the runs completed more than once
// (CompletedTwiceSQL).
func checkCompletions(db *sql.DB, r *Report) error {
	rows, err := db.Query(CompletedTwiceSQL)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		rows.Scan(&id)
		r.CompletedTwice = append(r.CompletedTwice, id)
	}
	return nil
}

// checkFollowUps finds the completed runs that name a follow-up and have
// none, or have two of one process.
func checkFollowUps(db *sql.DB, r *Report) error {
	rows, err := db.Query(`SELECT p.id, count(c.id), count(DISTINCT c.process) FROM runs p LEFT JOIN runs c ON c.parent_id = p.id
		WHERE p.status = 'completed' AND p.then_event != '' GROUP BY p.id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var children, processes int
		if err := rows.Scan(&id, &children, &processes); err != nil {
			return err
		}
		switch {
		case children == 0:
			r.MissingFollowUps = append(r.MissingFollowUps, id)
		case children > processes:
			r.DoubledFollowUps = append(r.DoubledFollowUps, id)
		}
	}
	return nil
}

// checkEffects holds each effect record against the witness: a completed
// effect's body ran once, a started one's at most once and its run is
// fenced (or, failed before reaching it again, Unresolved); a fenced run
// holds a started effect.
func checkEffects(db *sql.DB, r *Report, execs map[string]int, status map[string]string) error {
	rows, err := db.Query("SELECT r.id, e.key, e.status FROM effects e JOIN runs r ON r.seq = e.run_seq")
	if err != nil {
		return err
	}
	defer rows.Close()
	started := map[string]bool{}
	for rows.Next() {
		var id, key, st string
		if err := rows.Scan(&id, &key, &st); err != nil {
			return err
		}
		n := execs[id+"/"+key]
		switch st {
		case "completed":
			if n != 1 {
				r.EffectReruns = append(r.EffectReruns, fmt.Sprintf("%s/%s ran %d times", id, key, n))
			}
		case "started":
			if n > 1 {
				r.EffectReruns = append(r.EffectReruns, fmt.Sprintf("%s/%s (fenced) ran %d times", id, key, n))
			}
			switch status[id] {
			case "fenced":
			case "completed": // the attempt that completed it would have reached the effect and been fenced
				r.BadFences = append(r.BadFences, id+" has a started effect but is "+status[id])
			case "idle", "running": // NotTerminal reports it
			default:
				if !started[id] {
					r.Unresolved++
				}
			}
			started[id] = true
		}
	}
	rows.Close()
	for id, st := range status {
		if st == "fenced" && !started[id] {
			r.BadFences = append(r.BadFences, id+" is fenced without a started effect")
		}
	}
	return rows.Err()
}

// ReadLines reads a file written with AppendLine: its non-blank lines,
// trimmed; a missing file has none.
func ReadLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			out = append(out, t)
		}
	}
	return out, sc.Err()
}

// openSchema opens the database read-only. ok is false, with no error and
// nothing to close, when the file or its schema does not exist yet: a child
// killed while creating the database (migrations commit whole) leaves one
// of those, which is a valid state holding no runs.
func openSchema(dbPath string) (db *sql.DB, ok bool, err error) {
	if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if db, err = sql.Open("sqlite", "file:"+dbPath+"?mode=ro"); err != nil {
		return nil, false, err
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'runs'").Scan(&n); err != nil {
		db.Close()
		return nil, false, err
	}
	if n == 0 {
		db.Close()
		return nil, false, nil
	}
	return db, true, nil
}
