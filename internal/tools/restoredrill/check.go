package restoredrill

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/tools/crashtest"
)

// dbState is what the drill reads from a database.
type dbState struct {
	integrity string
	runs      map[string]runRow          // by run id
	byKey     map[string]bool            // root idempotency keys present
	effects   map[string]string          // order/effect → status
	twice     []string                   // runs completed twice
	started   map[string]map[string]bool // run id → started effect names
}

type runRow struct{ order, status, code string }

func readDB(path string) (dbState, error) {
	s := dbState{runs: map[string]runRow{}, byKey: map[string]bool{}, effects: map[string]string{},
		started: map[string]map[string]bool{}}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return s, err
	}
	defer db.Close()
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&s.integrity); err != nil {
		return s, err
	}
	rows, err := db.Query("SELECT id, coalesce(idem_key, ''), status, error_code, coalesce(payload, '') FROM runs")
	if err != nil {
		return s, err
	}
	seqOrder := map[string]string{}
	for rows.Next() {
		var id, key, st, code string
		var payload []byte
		if err := rows.Scan(&id, &key, &st, &code, &payload); err != nil {
			rows.Close()
			return s, err
		}
		var o order
		json.Unmarshal(payload, &o)
		s.runs[id] = runRow{order: o.Order, status: st, code: code}
		seqOrder[id] = o.Order
		if key != "" {
			s.byKey[key] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, err
	}
	rows, err = db.Query("SELECT r.id, e.key, e.status FROM effects e JOIN runs r ON r.seq = e.run_seq")
	if err != nil {
		return s, err
	}
	for rows.Next() {
		var id, key, st string
		if err := rows.Scan(&id, &key, &st); err != nil {
			rows.Close()
			return s, err
		}
		name := strings.Join(yella.DecodeKey(key), "/")
		b := seqOrder[id] + "/" + name
		s.effects[b] = st
		if st == "started" {
			if s.started[id] == nil {
				s.started[id] = map[string]bool{}
			}
			s.started[id][name] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, err
	}
	rows, err = db.Query(crashtest.CompletedTwiceSQL)
	if err != nil {
		return s, err
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		s.twice = append(s.twice, id)
	}
	rows.Close()
	return s, rows.Err()
}

// judge compares the acknowledgements and the witness (the outside world)
// with the restored database (snap) and the drained one (after).
func judge(res *Result, p paths, killAt time.Time, snap, after dbState) error {
	acks, err := ReadAcks(p.acks)
	if err != nil {
		return err
	}
	judgeLost(res, acks, killAt, snap)
	if err := judgeEffects(res, p.witness, snap); err != nil {
		return err
	}
	judgeRuns(res, snap, after)
	return nil
}

// judgeLost lists the acknowledged admissions the restored database lacks,
// with those acknowledged longer before the kill than the bounds allow.
func judgeLost(res *Result, acks map[string]time.Time, killAt time.Time, snap dbState) {
	res.Acked = len(acks)
	keys := make([]string, 0, len(acks))
	for k := range acks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if snap.byKey[k] {
			continue
		}
		res.Lost = append(res.Lost, k)
		age := killAt.Sub(acks[k])
		res.OldestLostAge = max(res.OldestLostAge, age)
		if age > res.Bound {
			res.LostTooOld = append(res.LostTooOld, fmt.Sprintf("%s (acknowledged %v before the kill)", k, age.Round(time.Millisecond)))
		}
		if res.StatusWindow > 0 && age > res.StatusWindow {
			res.LostBeyondStatus = append(res.LostBeyondStatus, fmt.Sprintf("%s (acknowledged %v before the kill)", k, age.Round(time.Millisecond)))
		}
	}
}

// judgeEffects holds every effect body execution in the witness, before
// the kill (the child) and after the restore (this process), against the
// effect records the restore holds: a replicated completed effect ran once
// and never again, a replicated started one at most once.
func judgeEffects(res *Result, witnessPath string, snap dbState) error {
	child, parent := map[string]int{}, map[string]int{}
	lines, err := crashtest.ReadLines(witnessPath)
	if err != nil {
		return err
	}
	me := os.Getpid()
	for _, l := range lines {
		var w witnessLine
		if err := json.Unmarshal([]byte(l), &w); err != nil {
			return fmt.Errorf("witness line %q: %w", l, err)
		}
		b := w.Order + "/" + w.Effect
		if w.PID == me {
			parent[b]++
			res.ParentExecutions++
		} else {
			child[b]++
			res.ChildExecutions++
		}
	}
	effects := map[string]bool{}
	for b := range child {
		effects[b] = true
	}
	for b := range parent {
		effects[b] = true
	}
	for b := range snap.effects {
		effects[b] = true
	}
	names := make([]string, 0, len(effects))
	for b := range effects {
		names = append(names, b)
	}
	sort.Strings(names)
	for _, b := range names {
		c, a := child[b], parent[b]
		switch snap.effects[b] {
		case "completed":
			res.ReplicatedCompleted++
			if a > 0 || c != 1 {
				res.Reruns = append(res.Reruns, fmt.Sprintf("%s completed and replicated, ran %d times before the kill and %d after the restore", b, c, a))
			}
		case "started":
			if a > 0 || c > 1 {
				res.Reruns = append(res.Reruns, fmt.Sprintf("%s started and replicated, ran %d times before the kill and %d after the restore", b, c, a))
			}
		default:
			switch {
			case c > 0 && a > 0:
				res.ReExecutedAfterRestore++
			case c > 0:
				res.ExecutedThenLost++
			}
		}
	}
	return nil
}

// judgeRuns checks that every run of the drained database is terminal and
// that a run is fenced exactly when the restore holds a started effect of
// it.
func judgeRuns(res *Result, snap, after dbState) {
	for id, r := range after.runs {
		switch r.status {
		case "completed", "errored", "dead-letter":
		case "fenced":
			res.Fenced++
			if r.code != "EFFECT_FENCED" || len(snap.started[id]) == 0 {
				res.BadFences = append(res.BadFences, fmt.Sprintf("%s fenced with code %q and %d replicated started effects", id, r.code, len(snap.started[id])))
			}
		default:
			res.NotTerminal = append(res.NotTerminal, id+" "+r.status)
		}
	}
	for id := range snap.started {
		if st := after.runs[id].status; st != "fenced" {
			res.BadFences = append(res.BadFences, fmt.Sprintf("%s had a replicated started effect but ended %s", id, st))
		}
	}
	sort.Strings(res.BadFences)
	sort.Strings(res.NotTerminal)
	res.CompletedTwice = after.twice
}

// ReadAcks reads a child's acknowledged admissions (AcksPath): key →
// acknowledgement time. A torn last line is ignored.
func ReadAcks(path string) (map[string]time.Time, error) {
	lines, err := crashtest.ReadLines(path)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, l := range lines {
		k, ns, ok := strings.Cut(l, " ")
		n, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil {
			continue
		}
		out[k] = time.Unix(0, n)
	}
	return out, nil
}
