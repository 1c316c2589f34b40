package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestWriterStatementsFindRowsByKey: on tables the statistics do not know
// yet (new, never analyzed, 20,000 rows), a batch's attempt ends and
// effect records, planned under writerPlan, find each run and effect by
// its primary key, and retention reads its window of runs in key order;
// a batch's keyed admissions, its lookups of who holds their keys and of
// its admissions' parents find each row by key too.
// Without that, a prepared statement kept a plan that read the whole
// effects table (or every running run) at each batch: 1.1 ms a call at
// 20,000 effects. The follow-up runs of ends are filtered by an array of
// the applied ends' ords, read once: joined to those ends instead, their
// unnest was read again for each applied end.
func TestWriterStatementsFindRowsByKey(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "writerplan")
	sch := s.q.schema
	for _, q := range []string{
		`INSERT INTO ` + sch + `.runs (id, process, event, status, created_at, epoch, lease_node) SELECT 'r' || g, 'p', 'e', 'running', g, 1, 1 FROM generate_series(1, 20000) g`,
		`INSERT INTO ` + sch + `.run_ids (id, seq) SELECT id, seq FROM ` + sch + `.runs`,
		`INSERT INTO ` + sch + `.effects (run_seq, key, status, epoch, started_at) SELECT seq, 'k', 'started', 1, 1 FROM ` + sch + `.runs`,
		`INSERT INTO ` + sch + `.pruned_keys (event, key, process, run_id, created_at) SELECT '', 'k' || g, '', 'x' || g, g FROM generate_series(1, 20000) g`,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, set := range writerPlan {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	n := 20
	ids, keys, strs, eps, ords, bools, blobs := make([]string, n), make([]string, n), make([]string, n), make([]int64, n), make([]int32, n), make([]bool, n), make([][]byte, n)
	seqs := make([]int64, n)
	for i := range n {
		ids[i], keys[i], eps[i], ords[i], seqs[i] = fmt.Sprintf("r%d", 100+i), "k", 1, int32(i), int64(100+i)
	}
	// A follow-up run for each end: its end's ord, id, process, event,
	// correlation and parent ids, depth, payload, context, admission
	// time, priority, keys, start time, group key and claim (node and
	// lease expiry).
	fids, nostr, noint, nobig := make([]string, n), make([]*string, n), make([]*int32, n), make([]*int64, n)
	for i := range n {
		fids[i] = fmt.Sprintf("f%d", i)
	}
	follow := []any{ords, fids, strs, strs, nostr, nostr, ords, blobs, blobs, eps, noint, nostr, nostr, nobig, nostr, noint, nobig}
	type planCase struct {
		name, sql string
		args      []any
		want      []string
	}
	// The ends of held runs, in both forms, alone, with effect outcomes,
	// with follow-up runs and with both.
	var held []planCase
	for _, f := range []struct {
		name  string
		sql   *[4]string
		attrs []any
	}{
		{"attempt ends of held runs", &s.q.finishHeld, []any{ords, seqs, eps, strs, strs, strs, bools, blobs, bools, strs, bools, eps, eps, strs, eps, strs}},
		{"completions of held runs", &s.q.completeHeld, []any{ords, seqs, eps, blobs, strs, eps, strs}},
	} {
		for k, sql := range f.sql {
			c := planCase{f.name, sql, slices.Clone(f.attrs), []string{"Index Scan using runs_pkey on runs r", "Index Cond: (seq = i"}}
			if k&heldWithEffects != 0 {
				c.name += ", with effect outcomes"
				c.args = append(c.args, ords, seqs, eps, keys, strs, blobs, strs, eps)
				c.want = append(c.want, "Index Cond: ((run_seq = o.seq) AND (key = o.key))")
			}
			if k&heldWithFollowUps != 0 {
				c.name += ", with follow-up runs"
				c.args = append(c.args, follow...)
				c.want = append(c.want, "Insert on run_ids", "Filter: (end_ord = ANY (")
			}
			c.args = append(c.args, int32(1)) // the counts shard
			c.want = append(c.want, "Insert on counts")
			held = append(held, c)
		}
	}
	for _, c := range append(held, []planCase{
		{"effect finishes", s.q.effFinishMany, []any{ords, ids, eps, keys, strs, blobs, strs, eps},
			[]string{"Index Cond: ((run_seq = i.seq) AND (key = i.key))"}},
		{"attempt ends", s.q.finishMany, []any{ords, ids, eps, strs, strs, strs, bools, blobs, bools, strs, bools, eps, eps, strs, eps, strs},
			[]string{"Index Cond: (seq = ANY ($", "Index Cond: (id = i"}},
		{"effect finishes of held runs", s.q.effFinishHeld, []any{ords, seqs, eps, keys, strs, blobs, strs, eps},
			[]string{"Index Cond: ((run_seq = o.seq) AND (key = o.key))"}},
		{"effect starts", s.q.effStartMany, []any{ords, ids, eps, keys, eps},
			[]string{"Index Cond: (seq = ANY ($", "Index Cond: (id = i"}},
		{"effect starts of held runs", s.q.effStartHeld, []any{ords, seqs, eps, keys, eps},
			[]string{"Index Scan using runs_pkey on runs r", "Index Cond: (seq = i"}},
		{"effect starts of new keys of held runs", s.q.effStartNew, []any{ords, seqs, eps, keys, eps},
			[]string{"Index Scan using runs_pkey on runs r", "Index Cond: (seq = i"}},
		{"keyed admissions", s.q.insKeyed, []any{fids, strs, strs, nostr, nostr, ords, blobs, blobs, eps, noint, nostr, nostr, nobig, nostr, keys},
			[]string{"Index Only Scan using pruned_keys_pkey on pruned_keys k"}},
		{"the holders of keys", s.q.selIdemKeys, []any{strs, keys, strs}, []string{"Index Scan using runs_idem on runs r"}},
		{"the pruned keys", s.q.selKeptKeys, []any{strs, keys, strs}, []string{"Index Scan using pruned_keys_pkey on pruned_keys p"}},
		{"the parents of admissions", s.q.idsExist, []any{ids}, []string{"run_ids_pkey"}},
		{"retention's window", s.q.pruneScan, []any{int64(5), int64(100), 40},
			[]string{"Index Scan using runs_pkey on runs r", "Index Cond: (seq > "}},
		{"retention", s.q.prune, []any{int64(5), eps},
			[]string{"Index Scan using runs_pkey on runs r", "Index Cond: (seq = ANY ("}},
	}...) {
		plan := explain(t, tx, c.sql, c.args...)
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: the plan has no %q:\n%s", c.name, w, plan)
			}
		}
		for _, bad := range []string{"Seq Scan on runs", "Seq Scan on effects", "Seq Scan on run_ids", "Seq Scan on pruned_keys", "Hash Join", "Merge Join", "Bitmap Heap Scan on runs"} {
			if strings.Contains(plan, bad) {
				t.Errorf("%s: the plan has %q:\n%s", c.name, bad, plan)
			}
		}
	}
}

// TestWriterPlansWithoutJIT: a writer's transaction plans with JIT off
// and the plan settings of writerPlan on. The settings price the plans
// they rule out far above PostgreSQL's JIT thresholds, so a statement
// left with one would be compiled at each execution (200 ms measured).
func TestWriterPlansWithoutJIT(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "writerjit")
	var jit, seqscan string
	err := s.run(ctx, func(w *wtx) error {
		return w.tx.QueryRow(w.ctx, `SELECT current_setting('jit'), current_setting('enable_seqscan')`).Scan(&jit, &seqscan)
	})
	if err != nil {
		t.Fatal(err)
	}
	if jit != "off" || seqscan != "off" {
		t.Errorf("a writer's transaction runs with jit %s, enable_seqscan %s; want both off", jit, seqscan)
	}
}
