package pgstore

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// TestCompletionFormWritesAsGeneralForm: the completion form of the ends
// of held runs writes a run and its timeline exactly as the general form
// does, and answers the same rows: two copies of each run, one ended by
// each form in one transaction, then compared column by column. The runs
// cover a first attempt (its timeline implicit), a later attempt after a
// failure (error and retry time cleared, two timeline entries), a follow-up
// event and a version, and an end fenced by its epoch (neither form writes).
func TestCompletionFormWritesAsGeneralForm(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "completeform")
	sch := s.q.schema
	type runCase struct {
		name                         string
		tl, attempts, epoch          int
		err, code, version           string
		retryAt                      *int64
		endEpoch                     int64
		output                       []byte
		then, endVersion             string
		wantTimeline, wantCompletion bool
	}
	retry := int64(500)
	cases := []runCase{
		{name: "first attempt", tl: 1, attempts: 1, epoch: 1, endEpoch: 1, output: []byte(`{"a":1}`), wantCompletion: true},
		{name: "first attempt, follow-up event and version", tl: 1, attempts: 1, epoch: 1, version: "v1", endEpoch: 1, output: []byte(`2`),
			then: "next", endVersion: "v2", wantCompletion: true},
		{name: "no output", tl: 1, attempts: 1, epoch: 1, endEpoch: 1, wantCompletion: true},
		{name: "after a failure", tl: 3, attempts: 2, epoch: 2, err: "boom", code: "X", retryAt: &retry, endEpoch: 2, output: []byte(`3`),
			wantTimeline: true, wantCompletion: true},
		{name: "fenced", tl: 1, attempts: 1, epoch: 2, endEpoch: 1, output: []byte(`4`)},
	}
	rule := store.RuleOf(store.ActionComplete)
	now := time.Unix(0, 1_000_000)
	var cs []*cmd
	var args []sets
	var idx []int
	seqs := [2][]int64{}
	for i, c := range cases {
		u := store.Update{RunID: fmt.Sprint("run", i), Epoch: c.endEpoch, To: store.StatusCompleted, Output: c.output, Then: c.then,
			Version: c.endVersion, Now: now}
		o, _, err := rule.Outcome(&u, 0)
		if err != nil {
			t.Fatal(err)
		}
		f := &finish{u: u, rule: rule, o: o}
		a := setArgs(rule, &f.u, &f.o, false, false)
		if !plainCompletion(f, &a) {
			t.Fatalf("%s: not a plain completion: %+v", c.name, a)
		}
		cs, args, idx = append(cs, &cmd{fin: f}), append(args, a), append(idx, i)
		for form := range 2 {
			var seq int64
			err := s.pool.QueryRow(ctx, `INSERT INTO `+sch+`.runs (id, process, event, status, payload, error, error_code, attempts, epoch,
				retry_at, lease_node, lease_expires, created_at, started_at, version, tl)
				VALUES ($1, 'p', 'e', 'running', '{}', $2, $3, $4, $5, $6, 1, 900, 10, 20, $7, $8) RETURNING seq`,
				fmt.Sprint(form, "-", i), c.err, c.code, c.attempts, c.epoch, c.retryAt, c.version, c.tl).Scan(&seq)
			if err != nil {
				t.Fatal(err)
			}
			seqs[form] = append(seqs[form], seq)
		}
	}
	held := make([]heldRun, len(cases))
	for i := range held {
		held[i].seq = seqs[1][i]
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	answers := [2][][]any{}
	for form, q := range []struct {
		sql  string
		args []any
	}{
		{s.q.finishHeld[0], append(finishArgs(cs, idx, args, func(i int) int64 { return seqs[0][i] }), int32(1))},
		{s.q.completeHeld[0], append(completeArgs(cs, idx, args, held), int32(1))},
	} {
		rows, err := tx.Query(ctx, q.sql, q.args...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			answers[form] = append(answers[form], v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if len(answers[1]) != len(cases)-1 || !reflect.DeepEqual(answers[0], answers[1]) {
		t.Errorf("the forms answer differently:\ngeneral:    %v\ncompletion: %v", answers[0], answers[1])
	}
	read := func(seq int64) (map[string]any, [][]any) {
		rows, err := tx.Query(ctx, `SELECT * FROM `+sch+`.runs WHERE seq = $1`, seq)
		if err != nil {
			t.Fatal(err)
		}
		run, err := pgx.CollectOneRow(rows, pgx.RowToMap)
		if err != nil {
			t.Fatal(err)
		}
		delete(run, "seq")
		delete(run, "id")
		rows, err = tx.Query(ctx, `SELECT n, at, status, attempt, error, code, note FROM `+sch+`.timeline WHERE run_seq = $1 ORDER BY n`, seq)
		if err != nil {
			t.Fatal(err)
		}
		tl, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
		if err != nil {
			t.Fatal(err)
		}
		return run, tl
	}
	for i, c := range cases {
		general, generalTL := read(seqs[0][i])
		complete, completeTL := read(seqs[1][i])
		if !reflect.DeepEqual(general, complete) {
			t.Errorf("%s: the forms write the run differently:\ngeneral:    %v\ncompletion: %v", c.name, general, complete)
		}
		if !reflect.DeepEqual(generalTL, completeTL) {
			t.Errorf("%s: the forms write the timeline differently:\ngeneral:    %v\ncompletion: %v", c.name, generalTL, completeTL)
		}
		if got := complete["status"] == string(store.StatusCompleted); got != c.wantCompletion {
			t.Errorf("%s: completed %v, want %v", c.name, got, c.wantCompletion)
		}
		if got := len(completeTL) > 0; got != c.wantTimeline {
			t.Errorf("%s: timeline entries %v, want some: %v", c.name, completeTL, c.wantTimeline)
		}
	}
}

// TestPlainCompletion: only an end that completes its run as the complete
// rule does takes the completion form.
func TestPlainCompletion(t *testing.T) {
	now := time.Unix(0, 1_000_000)
	for _, c := range []struct {
		name string
		u    store.Update
		want bool
	}{
		{"complete", store.Update{Action: store.ActionComplete, Output: []byte(`1`), Then: "next", Version: "v2"}, true},
		{"complete without output", store.Update{Action: store.ActionComplete}, true},
		{"defer", store.Update{Action: store.ActionDefer, Output: []byte(`1`)}, false},
		{"fail", store.Update{Action: store.ActionFail, Error: "boom"}, false},
		{"retry later", store.Update{Action: store.ActionRetryLater, Error: "boom", RetryAt: now.Add(time.Second)}, false},
		{"dead letter", store.Update{Action: store.ActionDeadLetter, Error: "boom"}, false},
		{"fence", store.Update{Action: store.ActionFence, Error: "unknown outcome"}, false},
		{"hand back", store.Update{Action: store.ActionHandBack}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.u.Now, c.u.RunID, c.u.Epoch = now, "r", 1
			rule, err := c.u.Rule()
			if err != nil {
				t.Fatal(err)
			}
			o, fallback, err := rule.Outcome(&c.u, 0)
			if err != nil {
				t.Fatal(err)
			}
			f := &finish{u: c.u, rule: rule, o: o}
			a := setArgs(rule, &f.u, &f.o, fallback, false)
			if got := plainCompletion(f, &a); got != c.want {
				t.Errorf("plainCompletion = %v, want %v (%+v)", got, c.want, a)
			}
		})
	}
}
