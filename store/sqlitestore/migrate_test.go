package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// A database written by schema version 1 opens at the current version with
// every run, timeline entry and count intact; it then takes the cancelled
// status and keeps the keys of pruned runs.
func TestMigrateFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	stmts := []string{ms[0].sql, "PRAGMA user_version = 1"}
	v1 := []string{"idle", "running", "completed", "deferred", "errored", "dead-letter", "fenced"}
	for i, st := range v1 {
		stmts = append(stmts, `INSERT INTO runs (seq, id, process, event, status, idem_key, created_at, completed_at, tl)
			VALUES (`+itoa(i+1)+`, 'r`+itoa(i+1)+`', 'p', 'ev', '`+st+`', 'k`+itoa(i+1)+`', `+itoa64(t0)+`, `+itoa64(t0)+`, 2)`,
			`INSERT INTO timeline (run_seq, n, at, status, attempt, note) VALUES (`+itoa(i+1)+`, 2, `+itoa64(t0)+`, '`+st+`', 1, 'v1')`)
	}
	for _, st := range stmts {
		if _, err := raw.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	raw.Close()

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var v int
	s.rdb.QueryRow("PRAGMA user_version").Scan(&v)
	if v != SchemaVersion() || v < 2 {
		t.Fatalf("user_version %d, want %d", v, SchemaVersion())
	}
	var ok string
	s.rdb.QueryRow("PRAGMA integrity_check").Scan(&ok)
	if ok != "ok" {
		t.Fatalf("integrity_check: %s", ok)
	}
	counts, _ := s.Counts(ctx)
	for _, st := range store.Statuses {
		want := int64(0) // statuses added after version 1
		if slices.Contains(v1, string(st)) {
			want = 1
		}
		if counts[st] != want {
			t.Errorf("count of %s = %d, want %d", st, counts[st], want)
		}
	}
	tl, err := s.Timeline(ctx, "r3")
	if err != nil || len(tl) != 2 || tl[1].Note != "v1" {
		t.Fatalf("timeline of r3 after the migration: %+v, %v", tl, err)
	}
	// The live run's key still admits nothing new.
	res, err := s.Admit(ctx, store.Admission{Event: "ev", IdempotencyKey: "k1", Runs: []store.NewRun{{ID: "new", Process: "p"}}, Now: time.Unix(0, t0)})
	if err != nil || len(res.Existing) != 1 || res.Existing[0].ID != "r1" {
		t.Fatalf("admit k1: %+v, %v", res, err)
	}
	// The new status is accepted.
	if _, err := s.Update(ctx, store.Update{RunID: "r1", Now: time.Unix(0, t0), From: []store.Status{store.StatusIdle}, To: store.StatusCancelled}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	// A pruned run's key is kept.
	if n, err := s.Prune(ctx, store.PruneRequest{CompletedBefore: time.Unix(0, t0+1), Limit: 10}); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	res, err = s.Admit(ctx, store.Admission{Event: "ev", IdempotencyKey: "k3", Runs: []store.NewRun{{ID: "new3", Process: "p"}}, Now: time.Unix(0, t0)})
	if err != nil || len(res.Pruned) != 1 || res.Pruned[0].ID != "r3" {
		t.Fatalf("admit k3 after its run was pruned: %+v, %v", res, err)
	}
}

func itoa(n int) string     { return itoa64(int64(n)) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// v3Tables are the tables of schema version 3 with their columns, in a
// stable order, for comparing their rows across a migration.
var v3Tables = []struct{ name, cols, order string }{
	{"runs", `seq, id, process, event, correlation_id, parent_id, depth, status, payload, context, output, error, error_code,
		then_event, idem_key, attempts, epoch, retry_at, lease_owner, lease_expires, created_at, started_at, completed_at,
		version, tl, priority, rate_key, conc_key, rate_tat`, "seq"},
	{"timeline", "run_seq, n, at, status, attempt, error, code, note", "run_seq, n"},
	{"effects", "run_seq, key, status, epoch, output, error, started_at, completed_at", "run_seq, key"},
	{"pruned_keys", "event, key, process, run_id, created_at", "event, key, process"},
	{"rollups", "id, bucket, process, counts, hists", "id"},
	{"errors", "id, at, kind, process, run_id, effect_key, context, message", "id"},
}

// dumpTable reads every row of a table as the driver returns it.
func dumpTable(t *testing.T, db interface {
	Query(string, ...any) (*sql.Rows, error)
}, name, cols, order string) [][]any {
	t.Helper()
	rows, err := db.Query("SELECT " + cols + " FROM " + name + " ORDER BY " + order)
	if err != nil {
		t.Fatalf("dump %s: %v", name, err)
	}
	defer rows.Close()
	n := len(strings.Split(cols, ","))
	var out [][]any
	for rows.Next() {
		row := make([]any, n)
		ptrs := make([]any, n)
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("dump %s: %v", name, err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("dump %s: %v", name, err)
	}
	return out
}

// schemaObjects maps each index and table of a database to its SQL.
func schemaObjects(t *testing.T, db interface {
	Query(string, ...any) (*sql.Rows, error)
}) map[string]string {
	t.Helper()
	rows, err := db.Query("SELECT type || ' ' || name, coalesce(sql, '') FROM sqlite_master")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, q string
		if err := rows.Scan(&name, &q); err != nil {
			t.Fatal(err)
		}
		out[name] = q
	}
	return out
}

// dropped are the indexes versions 6 and 7 drop: the runs' indexes on process
// and event, written by every admission for listings alone, and the index
// of completed runs, written by every completion for retention alone.
var dropped = map[string]bool{"index runs_process": true, "index runs_event": true, "index runs_completed": true}

// replaced are the indexes a later version changes: version 7 leaves the
// completed runs out of the status index.
var replaced = map[string]string{"index runs_status": "CREATE INDEX runs_status ON runs (status) WHERE status <> 'completed'"}

// A database written by schema version 3 opens at the current version with
// every row of every table kept as it was, every index of version 3 kept
// but those version 6 drops, and the counts intact; it then takes waiting
// runs, waits and signals, grouped admissions and paused schedules, and
// its listings by process and by event find its runs.
func TestMigrateFromVersion3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v3.db")
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	ts := itoa64(t0)
	stmts := []string{ms[0].sql, ms[1].sql, ms[2].sql, "PRAGMA user_version = 3"}
	v3 := []string{"idle", "running", "completed", "deferred", "errored", "dead-letter", "fenced", "cancelled"}
	for i, st := range v3 {
		n := itoa(i + 1)
		lease, epoch := "NULL, NULL", "0"
		if st == "running" {
			lease, epoch = "'owner', "+itoa64(t0+int64(time.Hour)), "1"
		}
		stmts = append(stmts, `INSERT INTO runs (seq, id, process, event, correlation_id, parent_id, depth, status, payload, context, output,
				error, error_code, then_event, idem_key, attempts, epoch, retry_at, lease_owner, lease_expires, created_at, started_at,
				completed_at, version, tl, priority, rate_key, conc_key, rate_tat)
			VALUES (`+n+`, 'r`+n+`', 'p', 'ev', NULL, NULL, 0, '`+st+`', '{"in":`+n+`}', '{"c":`+n+`}', '{"out":`+n+`}',
				'err`+n+`', 'CODE', 'then', 'k`+n+`', 1, `+epoch+`, `+ts+`, `+lease+`, `+ts+`, `+ts+`,
				`+ts+`, 'v1', 2, `+n+`, 'rate`+n+`', 'conc`+n+`', `+itoa64(t0+int64(i))+`)`,
			`INSERT INTO timeline (run_seq, n, at, status, attempt, error, code, note) VALUES (`+n+`, 2, `+ts+`, '`+st+`', 1, 'e', 'c', 'v3')`)
	}
	stmts = append(stmts,
		// A follow-up run of r3, and its effects in every version-3 status.
		`INSERT INTO runs (seq, id, process, event, correlation_id, parent_id, depth, status, created_at)
			VALUES (9, 'child', 'q', 'next', 'r3', 'r3', 1, 'idle', `+ts+`)`,
		`INSERT INTO effects VALUES (2, 'a', 'started', 1, NULL, '', `+ts+`, NULL)`,
		`INSERT INTO effects VALUES (2, 'b', 'completed', 1, '7', '', `+ts+`, `+ts+`)`,
		`INSERT INTO effects VALUES (2, 'c', 'failed', 1, NULL, 'boom', `+ts+`, `+ts+`)`,
		`INSERT INTO pruned_keys VALUES ('ev', 'gone', 'p', 'r0', `+ts+`)`,
		`INSERT INTO rollups (bucket, process, counts, hists) VALUES (`+ts+`, 'p', '{"completed":1}', NULL)`,
		`INSERT INTO errors (at, kind, process, run_id, message) VALUES (`+ts+`, 'run', 'p', 'r5', 'boom')`,
	)
	for _, st := range stmts {
		if _, err := raw.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	before := map[string][][]any{}
	for _, tb := range v3Tables {
		before[tb.name] = dumpTable(t, raw, tb.name, tb.cols, tb.order)
	}
	schema3 := schemaObjects(t, raw)
	raw.Close()

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var v int
	s.rdb.QueryRow("PRAGMA user_version").Scan(&v)
	if v != SchemaVersion() || v < 4 {
		t.Fatalf("user_version %d, want %d", v, SchemaVersion())
	}
	var ok string
	s.rdb.QueryRow("PRAGMA integrity_check").Scan(&ok)
	if ok != "ok" {
		t.Fatalf("integrity_check: %s", ok)
	}
	for _, tb := range v3Tables {
		if after := dumpTable(t, s.rdb, tb.name, tb.cols, tb.order); !reflect.DeepEqual(after, before[tb.name]) {
			t.Errorf("%s changed by the migration:\n got %v\nwant %v", tb.name, after, before[tb.name])
		}
	}
	schema4 := schemaObjects(t, s.rdb)
	for name, q := range schema3 {
		if !strings.HasPrefix(name, "index ") {
			continue
		}
		if dropped[name] {
			if got, ok := schema4[name]; ok {
				t.Errorf("%s: %q after the migration, want it dropped (version 6 or 7)", name, got)
			}
			continue
		}
		if want, ok := replaced[name]; ok {
			q = want
		}
		if got, ok := schema4[name]; !ok || got != q {
			t.Errorf("%s: %q after the migration, want %q", name, got, q)
		}
	}
	for _, name := range []string{"index runs_wait_key", "index runs_wait_due", "table signals", "index signals_key", "index signals_keep_until",
		"index runs_group", "table paused_schedules"} {
		if _, ok := schema4[name]; !ok {
			t.Errorf("%s missing after the migration", name)
		}
	}
	var waitKeys, groupKeys int
	s.rdb.QueryRow("SELECT count(*) FROM runs WHERE wait_key IS NOT NULL").Scan(&waitKeys)
	if waitKeys != 0 {
		t.Errorf("%d runs with a wait key after the migration", waitKeys)
	}
	s.rdb.QueryRow("SELECT count(*) FROM runs WHERE group_key IS NOT NULL").Scan(&groupKeys)
	if groupKeys != 0 {
		t.Errorf("%d runs with a group key after the migration", groupKeys)
	}
	counts, _ := s.Counts(ctx)
	for _, st := range store.Statuses {
		want := map[store.Status]int64{store.StatusIdle: 2}[st]
		if slices.Contains(v3, string(st)) && st != store.StatusIdle {
			want = 1
		}
		if counts[st] != want {
			t.Errorf("count of %s = %d, want %d", st, counts[st], want)
		}
	}
	if r, err := s.Run(ctx, "r8"); err != nil || r.Status != store.StatusCancelled || r.RateKey != "rate8" || r.WaitKey != "" {
		t.Fatalf("r8 after the migration: %+v, %v", r, err)
	}
	// Listings by process and by event read the table (or the status
	// index) now: the same runs, in order.
	for _, c := range []struct {
		f    store.RunFilter
		want []string
	}{
		{store.RunFilter{Process: "p"}, []string{"r8", "r7", "r6", "r5", "r4", "r3", "r2", "r1"}},
		{store.RunFilter{Process: "q", Order: store.OldestFirst}, []string{"child"}},
		{store.RunFilter{Event: "ev", After: 4}, []string{"r3", "r2", "r1"}},
		{store.RunFilter{Event: "next"}, []string{"child"}},
		{store.RunFilter{Process: "p", Statuses: []store.Status{store.StatusIdle, store.StatusCompleted}}, []string{"r3", "r1"}},
		{store.RunFilter{Event: "ev", Statuses: []store.Status{store.StatusRunning}}, []string{"r2"}},
		{store.RunFilter{Process: "q", Event: "ev"}, nil},
	} {
		c.f.Limit = 100
		rs, err := s.Runs(ctx, c.f)
		var got []string
		for _, r := range rs {
			got = append(got, r.ID)
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("runs %+v: %v, %v; want %v", c.f, got, err, c.want)
		}
	}

	// The running run of version 3 waits for a signal, which wakes it.
	now := time.Unix(0, t0)
	res, err := s.Update(ctx, store.Update{RunID: "r2", Epoch: 1, Now: now, Action: store.ActionWait, Wait: &store.Wait{Key: "w", Signal: "go"}})
	if err != nil || res.Run.Status != store.StatusWaiting || res.Run.WaitKey != "go" {
		t.Fatalf("wait: %+v, %v", res.Run, err)
	}
	sig, err := s.Signal(ctx, store.SignalRequest{Key: "go", Payload: json.RawMessage(`"ok"`), Now: now})
	if err != nil || sig.Woken == nil || sig.Woken.ID != "r2" || sig.Woken.Status != store.StatusIdle {
		t.Fatalf("signal: %+v, %v", sig, err)
	}
	effs, _ := s.Effects(ctx, "r2")
	if len(effs) != 4 || effs[3].Key != "w" || effs[3].Status != store.EffectCompleted || string(effs[3].Output) != `"ok"` {
		t.Fatalf("effects of r2: %+v", effs)
	}
	if sig, err := s.Signal(ctx, store.SignalRequest{Key: "later", Now: now, KeepUntil: now.Add(time.Hour)}); err != nil || !sig.Kept {
		t.Fatalf("a signal no run waits for: %+v, %v", sig, err)
	}

	// A run of version 3 has no group: a singleton admission of its
	// process is admitted, and the next one grouped into it.
	for i, want := range []string{"g1", "g1"} {
		res, err := s.Admit(ctx, store.Admission{Event: "ev", Now: now,
			Runs: []store.NewRun{{ID: "g" + itoa(i+1), Process: "p", GroupKey: "k", Group: store.GroupSingleton}}})
		var got string
		switch {
		case err != nil:
		case len(res.Admitted) == 1:
			got = res.Admitted[0].ID
		case len(res.Grouped) == 1:
			got = res.Grouped[0].ID
		}
		if got != want {
			t.Fatalf("singleton admission %d: %+v, %v; want %s", i+1, res, err, want)
		}
	}
	if err := s.PauseSchedule(ctx, "nightly", true, now); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if p, err := s.PausedSchedules(ctx); err != nil || !p["nightly"].Equal(now) {
		t.Fatalf("paused schedules: %v, %v", p, err)
	}
}
