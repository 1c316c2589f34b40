package crashtest

import (
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Reclaims times how fast a restarted process takes up the runs a killed
// one held. After each kill, Killed records the runs left running (their
// owner is dead). After each later child, Ran looks in the database for
// when the child claimed each of them again, and measures that from the
// child's start: the README's "resumes at once, not after the lease"
// (a lease is 30 s by default). A run ended at the reclaim without another
// attempt (its retry budget spent) counts from its reclaim.
//
// The times come from the children's clocks (stored in the database) and
// the parent's (the child's start): the same machine's wall clock.
type Reclaims struct {
	DB string
	// Max is the longest time from a child's start to its taking up a run
	// a killed child held; Taken counts the runs taken up.
	Max   time.Duration
	Taken int

	pending map[string]int // run id → the attempt it was in when its owner died
}

// Killed records the runs the killed child left running. It returns how
// many there are.
func (r *Reclaims) Killed() (int, error) {
	db, ok, err := openSchema(r.DB)
	if err != nil || !ok {
		return 0, err
	}
	defer db.Close()
	rows, err := db.Query("SELECT id, attempts FROM runs WHERE status = 'running'")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if r.pending == nil {
		r.pending = map[string]int{}
	}
	n := 0
	for rows.Next() {
		var id string
		var attempt int
		if err := rows.Scan(&id, &attempt); err != nil {
			return n, err
		}
		r.pending[id] = attempt
		n++
	}
	return n, rows.Err()
}

// Pending is the number of held runs no child has taken up yet.
func (r *Reclaims) Pending() int { return len(r.pending) }

// Ran resolves the held runs that a child, started at start and gone at
// end, took up. It returns a failure for each run taken up later than
// within after start, and for each run left untaken by a child that lived
// longer than within; runs left untaken by a child that died sooner stay
// pending for the next one.
func (r *Reclaims) Ran(start, end time.Time, within time.Duration) ([]string, error) {
	if len(r.pending) == 0 {
		return nil, nil
	}
	db, err := sql.Open("sqlite", "file:"+r.DB+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ids := make([]string, 0, len(r.pending))
	for id := range r.pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var failures []string
	for _, id := range ids {
		at, ok, err := takenUp(db, id, r.pending[id])
		if err != nil {
			return failures, err
		}
		if !ok || at.Before(start) || at.After(end) {
			if end.Sub(start) > within {
				failures = append(failures, fmt.Sprintf("run %s, held by the killed owner, was not taken up within %v of the restart", id, within))
				delete(r.pending, id)
			}
			continue
		}
		delete(r.pending, id)
		d := at.Sub(start)
		r.Taken++
		r.Max = max(r.Max, d)
		if d > within {
			failures = append(failures, fmt.Sprintf("run %s, held by the killed owner, claimed again %v after the restart, want ≤ %v", id, d.Round(time.Millisecond), within))
		}
	}
	return failures, nil
}

// takenUp returns when a run whose owner died in attempt was claimed for
// its next attempt, or, if there was none, when it was ended at the
// reclaim.
func takenUp(db *sql.DB, id string, attempt int) (time.Time, bool, error) {
	var ns int64
	// An attempt's claim is the implicit "running" entry of the timeline,
	// written when the attempt ends; one still running has its start in
	// the run's row.
	err := db.QueryRow(`SELECT t.at FROM timeline t JOIN runs r ON r.seq = t.run_seq
		WHERE r.id = ? AND t.status = 'running' AND t.attempt = ?`, id, attempt+1).Scan(&ns)
	if errors.Is(err, sql.ErrNoRows) {
		err = db.QueryRow(`SELECT started_at FROM runs WHERE id = ? AND status = 'running' AND attempts = ?`, id, attempt+1).Scan(&ns)
	}
	if errors.Is(err, sql.ErrNoRows) {
		err = db.QueryRow(`SELECT t.at FROM timeline t JOIN runs r ON r.seq = t.run_seq
			WHERE r.id = ? AND t.attempt = ? AND t.note = 'lease expired' AND r.status NOT IN ('idle', 'running')`, id, attempt).Scan(&ns)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return time.Unix(0, ns), true, nil
}
