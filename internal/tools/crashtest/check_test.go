package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// The checker must catch each violation it exists for: a negative control
// built by hand.
func TestCheckCatchesViolations(t *testing.T) {
	dir := t.TempDir()
	db, witness, acks := filepath.Join(dir, "c.db"), filepath.Join(dir, "w.jsonl"), filepath.Join(dir, "a.txt")
	writeViolations(t, db)

	line := func(run string) string {
		b, _ := json.Marshal(WitnessLine{Run: run, Key: "str:charge"})
		return string(b)
	}
	os.WriteFile(witness, []byte(strings.Join([]string{line("k-0-run"), line("k-0-run")}, "\n")), 0o644)
	os.WriteFile(acks, []byte("k-0\nk-1\nk-3\nk-4\nk-5\nk-6\nk-7\nk-9\n"), 0o644)

	rep, err := Check(db, witness, acks, "k-")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int{ // found, want
		"lost (k-9)":                         {len(rep.Lost), 1},
		"unexpected (x-2)":                   {len(rep.Unexpected), 1},
		"not terminal (k-1, x-2, k-7-child)": {len(rep.NotTerminal), 3},
		"completed twice (k-0)":              {len(rep.CompletedTwice), 1},
		"effect reruns (k-0)":                {len(rep.EffectReruns), 1},
		"bad fences (k-3)":                   {len(rep.BadFences), 1},
		"unresolved (k-4)":                   {rep.Unresolved, 1},
		"missing follow-up (k-5)":            {len(rep.MissingFollowUps), 1},
		"doubled follow-up (k-6)":            {len(rep.DoubledFollowUps), 1},
		"roots":                              {rep.Roots, 8},
	}
	for what, n := range got {
		if n[0] != n[1] {
			t.Errorf("%s: %d, want %d (%+v)", what, n[0], n[1], rep)
		}
	}
	if rep.OK() {
		t.Error("report is OK despite violations")
	}
}

// writeViolations writes a database at db that breaks every invariant
// Check looks for, once each: runs k-0 to k-7 and x-2 (see the comments).
func writeViolations(t *testing.T, db string) {
	t.Helper()
	st, err := sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	admit := func(key string) store.Run {
		res, err := st.Admit(ctx, store.Admission{Event: "job", IdempotencyKey: key, Runs: []store.NewRun{{ID: key + "-run", Process: "job"}}, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return res.Admitted[0]
	}
	claim := func(id string) store.Run {
		rs, err := st.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Hour)})
		if err != nil || len(rs) != 1 {
			t.Fatal(err)
		}
		return rs[0]
	}
	// k-0: completed, but its effect body ran twice.
	r := claim(admit("k-0").ID)
	st.StartEffect(ctx, r.ID, r.Epoch, "str:charge", now)
	st.FinishEffect(ctx, r.ID, r.Epoch, "str:charge", store.EffectCompleted, json.RawMessage(`1`), "", now)
	st.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, To: store.StatusCompleted})
	// k-1: left running.
	claim(admit("k-1").ID)
	// x-2: never attempted by the admitter.
	admit("x-2")
	// k-3: a started effect on a completed run.
	r = claim(admit("k-3").ID)
	st.StartEffect(ctx, r.ID, r.Epoch, "str:charge", now)
	st.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, To: store.StatusCompleted})
	// k-4: a started effect on a run that failed for another reason: not a
	// violation, counted as unresolved.
	r = claim(admit("k-4").ID)
	st.StartEffect(ctx, r.ID, r.Epoch, "str:charge", now)
	st.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, To: store.StatusErrored, Error: "rejected", ErrorCode: "FAILED"})
	// k-5: completed naming a follow-up that was never admitted (as an
	// engine committing the two separately would leave it after a crash).
	r = claim(admit("k-5").ID)
	st.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, To: store.StatusCompleted, Then: "job:done"})
	// k-6: completed with its follow-up admitted twice.
	r = claim(admit("k-6").ID)
	st.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, To: store.StatusCompleted, Then: "job:done"})
	for _, id := range []string{"k-6-child-a", "k-6-child-b"} {
		c, err := st.Admit(ctx, store.Admission{Event: "job:done", ParentID: r.ID, CorrelationID: r.ID, Depth: 1, Runs: []store.NewRun{{ID: id, Process: "follow"}}, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		c1 := claim(c.Admitted[0].ID)
		st.Update(ctx, store.Update{RunID: c1.ID, Epoch: c1.Epoch, Now: now, To: store.StatusCompleted})
	}
	// k-7: completed with its follow-up: fine.
	r = claim(admit("k-7").ID)
	st.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, To: store.StatusCompleted, Then: "job:done",
		Children: &store.Admission{Event: "job:done", ParentID: r.ID, CorrelationID: r.ID, Depth: 1, Runs: []store.NewRun{{ID: "k-7-child", Process: "follow"}}, Now: now}})
	st.Close()
	// A second completion of k-0, as a broken store would write it.
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO timeline (run_seq, n, at, status, attempt) SELECT seq, 99, 0, 'completed', 1 FROM runs WHERE id = 'k-0-run'`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
}

// Reclaims times the claim of a held run from the restarted child's start,
// and reports a run taken up too late or never.
func TestReclaimsMeasuresTheHeldRun(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	st, err := sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	claimAt := func(id, owner string, at time.Time) store.Run {
		rs, err := st.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: owner, Now: at, LeaseUntil: at.Add(time.Hour)})
		if err != nil || len(rs) != 1 {
			t.Fatalf("claim: %v", err)
		}
		return rs[0]
	}
	for _, id := range []string{"fast", "slow", "never"} {
		res, err := st.Admit(ctx, store.Admission{Event: "job", Runs: []store.NewRun{{ID: id, Process: "job"}}, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		claimAt(res.Admitted[0].ID, "dead", t0)
	}
	// The owner dies; the runs are held.
	rc := &Reclaims{DB: db}
	st.Close()
	if n, err := rc.Killed(); err != nil || n != 3 {
		t.Fatalf("held %d, %v; want 3", n, err)
	}
	st, err = sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := t0.Add(time.Minute) // the restarted child's start
	for _, c := range []struct {
		id    string
		after time.Duration
	}{{"fast", 20 * time.Millisecond}, {"slow", 3 * time.Second}} {
		r, _ := st.Run(ctx, c.id)
		if _, err := st.Update(ctx, store.Update{RunID: c.id, Epoch: r.Epoch, Reclaim: true, Now: start, To: store.StatusIdle, Note: "lease expired"}); err != nil {
			t.Fatalf("reclaim %s: %v", c.id, err)
		}
		r = claimAt(c.id, "new", start.Add(c.after))
		st.Update(ctx, store.Update{RunID: c.id, Epoch: r.Epoch, Now: start.Add(c.after), To: store.StatusCompleted})
	}
	st.Close()
	failures, err := rc.Ran(start, start.Add(10*time.Second), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"slow, held by the killed owner, claimed again 3s after the restart", "never, held by the killed owner, was not taken up within 1s"}
	if len(failures) != len(want) {
		t.Fatalf("failures %q, want %d", failures, len(want))
	}
	for _, w := range want {
		found := false
		for _, f := range failures {
			found = found || strings.Contains(f, w)
		}
		if !found {
			t.Errorf("no failure says %q: %q", w, failures)
		}
	}
	if rc.Taken != 2 || rc.Max != 3*time.Second || rc.Pending() != 0 {
		t.Errorf("taken %d, max %v, pending %d; want 2, 3s, 0", rc.Taken, rc.Max, rc.Pending())
	}
}

// A child killed before its schema was committed leaves no file, or a file
// without tables: that holds no runs, so an admission acknowledged before
// it would be lost (reported), and none acknowledged means nothing lost.
func TestCheckBeforeTheSchema(t *testing.T) {
	dir := t.TempDir()
	witness, acks := filepath.Join(dir, "w.jsonl"), filepath.Join(dir, "a.txt")
	empty := filepath.Join(dir, "empty.db")
	db, err := sql.Open("sqlite", "file:"+empty)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA journal_mode = WAL; PRAGMA user_version = 0"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, path := range []string{filepath.Join(dir, "absent.db"), empty} {
		rep, err := Check(path, witness, acks, "k-")
		if err != nil || rep.Integrity != "ok" || rep.Runs != 0 || len(rep.Lost) != 0 {
			t.Errorf("%s with no acks: %+v, %v", filepath.Base(path), rep, err)
		}
		var rc Reclaims
		rc.DB = path
		if n, err := rc.Killed(); n != 0 || err != nil {
			t.Errorf("%s: Killed = %d, %v", filepath.Base(path), n, err)
		}
	}
	if err := AppendLine(acks, "k-1"); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(empty, witness, acks, "k-")
	if err != nil || len(rep.Lost) != 1 || rep.Lost[0] != "k-1" {
		t.Errorf("an acknowledged key with no schema: lost %v, %v", rep.Lost, err)
	}
}
