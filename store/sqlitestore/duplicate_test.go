package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// A refused duplicate admission (every process admitted before under the
// key) costs no write transaction; one with a process still to admit
// does, and admits it.
func TestDuplicateAdmitWritesNothing(t *testing.T) {
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "d.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	adm := func(procs ...string) store.AdmitResult {
		a := store.Admission{Event: "ev", IdempotencyKey: "k", Now: time.Now()}
		for _, p := range procs {
			a.Runs = append(a.Runs, store.NewRun{ID: newID(), Process: p})
		}
		res, err := st.Admit(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := adm("a", "b")
	before := st.Stats().Batches
	again := adm("a", "b")
	if got := st.Stats().Batches - before; got != 0 {
		t.Errorf("a refused duplicate admission committed %d write transactions, want 0", got)
	}
	if len(again.Admitted) != 0 || len(again.Existing) != 2 || again.Existing[0].ID != first.Admitted[0].ID || again.Existing[1].ID != first.Admitted[1].ID {
		t.Errorf("duplicate admission = %+v, want the first admission's runs as existing", again)
	}
	more := adm("a", "b", "c")
	if got := st.Stats().Batches - before; got != 1 {
		t.Errorf("an admission with a new process committed %d write transactions, want 1", got)
	}
	if len(more.Admitted) != 1 || more.Admitted[0].Process != "c" || len(more.Existing) != 2 {
		t.Errorf("admission with a new process = %+v, want c admitted and a, b existing", more)
	}
}
