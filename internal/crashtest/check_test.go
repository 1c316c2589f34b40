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

	line := func(run string) string {
		b, _ := json.Marshal(WitnessLine{Run: run, Key: "str:charge"})
		return string(b)
	}
	os.WriteFile(witness, []byte(strings.Join([]string{line("k-0-run"), line("k-0-run")}, "\n")), 0o644)
	os.WriteFile(acks, []byte("k-0\nk-1\nk-3\nk-4\nk-9\n"), 0o644)

	rep, err := Check(db, witness, acks, "k-")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int{ // found, want
		"lost (k-9)":              {len(rep.Lost), 1},
		"unexpected (x-2)":        {len(rep.Unexpected), 1},
		"not terminal (k-1, x-2)": {len(rep.NotTerminal), 2},
		"completed twice (k-0)":   {len(rep.CompletedTwice), 1},
		"effect reruns (k-0)":     {len(rep.EffectReruns), 1},
		"bad fences (k-3)":        {len(rep.BadFences), 1},
		"unresolved (k-4)":        {rep.Unresolved, 1},
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
