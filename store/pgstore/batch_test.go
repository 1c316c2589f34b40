package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// TestBatchPlainAdmissionsTogether: the plain admissions of a batch (no
// key or group; children of a stored run, or of a run of the batch, and
// runs of bounded processes among them), inserted by one statement per
// run of them, are stored and answered exactly as the same admissions one
// at a time; the others keep their place in the batch's order. (A failure
// deep in such a statement: Store/AdmitBatch/AllOrNothing of the
// conformance suite.)
func TestBatchPlainAdmissionsTogether(t *testing.T) {
	now := time.Unix(1_700_000_000, 42)
	const n = 300
	as := make([]store.Admission, n)
	for i := range as {
		nr := store.NewRun{ID: fmt.Sprintf("r%03d", i), Process: "p", Priority: i % 3}
		if i%7 == 0 {
			nr.RateKey, nr.ConcurrencyKey = fmt.Sprint("rate", i), "conc"
		}
		as[i] = store.Admission{Event: "e", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Runs: []store.NewRun{nr}, Now: now}
		if i%5 == 0 {
			as[i].Context = json.RawMessage(`{"c":1}`)
		}
		if i%11 == 0 {
			as[i].NotBefore = now.Add(time.Hour)
		}
		if i%13 == 0 {
			as[i].CorrelationID = "corr"
		}
		if i%17 == 4 { // a child of a stored run
			as[i].ParentID, as[i].CorrelationID, as[i].Depth = "parent", "parent", 1
		}
		if i%9 == 2 { // a bounded process with a run active before the batch: 3 more admitted, the others dropped
			as[i].Runs = append(as[i].Runs, store.NewRun{ID: fmt.Sprintf("r%03db", i), Process: "b", Limit: 4})
		}
		switch i {
		case 120: // a child of an earlier admission of the batch
			as[i].ParentID, as[i].CorrelationID, as[i].Depth = as[60].Runs[0].ID, as[60].Runs[0].ID, 1
		case 150:
			as[i].IdempotencyKey = "key" // read first: the runs before it are inserted before it
		case 151:
			as[i].IdempotencyKey = "key" // the same key: answered with 150's run
		case 200:
			as[i].Runs[0].Limit = 1000 // bounded: counts the runs before it
		case 260:
			as[i].Runs = append(as[i].Runs, store.NewRun{ID: "r260b", Process: "q"})
		}
	}

	alone, batch := planStore(t, "batch_alone"), planStore(t, "batch_together")
	parent := []store.Admission{{Event: "e", Runs: []store.NewRun{{ID: "parent", Process: "p"}, {ID: "b0", Process: "b"}}, Now: now}}
	oneAtATime(t, alone, parent)
	oneAtATime(t, batch, parent)
	want := oneAtATime(t, alone, as)
	got := admitTogether(t, batch, as, 3) // 0-149, the keyed 150 and 151, 152-299
	sameAsAlone(t, alone, batch, as, got, want)
	var bs []string
	for _, res := range got {
		for _, r := range res.Admitted {
			if r.Process == "b" {
				bs = append(bs, r.ID)
			}
		}
	}
	if want := []string{"r002b", "r011b", "r020b"}; !reflect.DeepEqual(bs, want) {
		t.Errorf("bounded process admitted %v, want %v", bs, want)
	}
}

// admitTogether admits as on st in one batch and returns the results,
// checking that at most inserts statements inserted its runs.
func admitTogether(t *testing.T, st *Store, as []store.Admission, inserts int64) []store.AdmitResult {
	t.Helper()
	calls := insertCalls(t, st)
	got, err := st.AdmitBatch(context.Background(), as)
	if err != nil {
		t.Fatal(err)
	}
	if calls != nil {
		if d := calls(); d > inserts {
			t.Errorf("the batch's runs were inserted by %d statements, want %d", d, inserts)
		}
	}
	return got
}

// oneAtATime admits as on st one at a time and returns the results.
func oneAtATime(t *testing.T, st *Store, as []store.Admission) []store.AdmitResult {
	t.Helper()
	var out []store.AdmitResult
	for _, a := range as {
		res, err := st.Admit(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res)
	}
	return out
}

// sameAsAlone checks that got, the results of a batch of as on batch,
// are want, those of the same admissions one at a time on alone, and
// that the two stores hold the same runs and counts.
func sameAsAlone(t *testing.T, alone, batch *Store, as []store.Admission, got, want []store.AdmitResult) {
	t.Helper()
	ctx := context.Background()
	if !reflect.DeepEqual(got, want) {
		for i := range got {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("admission %d: batch %+v\nalone %+v", i, got[i], want[i])
				break
			}
		}
	}
	for i := range as {
		for _, nr := range as[i].Runs {
			a, errA := alone.Run(ctx, nr.ID)
			b, errB := batch.Run(ctx, nr.ID)
			if !errors.Is(errB, errA) || !reflect.DeepEqual(a, b) {
				t.Errorf("%s stored:\nbatch %+v (%v)\nalone %+v (%v)", nr.ID, b, errB, a, errA)
			}
		}
	}
	ca, _ := alone.Counts(ctx)
	cb, _ := batch.Counts(ctx)
	if !reflect.DeepEqual(ca, cb) {
		t.Errorf("counts: batch %v, alone %v", cb, ca)
	}
}

// TestBatchKeyedAdmissionsTogether: a batch's admissions with an
// idempotency key (and nothing else to read: no parent, bound or group)
// are inserted by one statement per run of them, and only the runs left
// out are looked up: each run whose key is new is admitted; a key held by
// an earlier run, by an earlier admission of the same batch, or pruned
// answers with that run, per process; the results and the stored runs
// are those of the same admissions one at a time.
func TestBatchKeyedAdmissionsTogether(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 42)
	alone, batch := planStore(t, "keyed_alone"), planStore(t, "keyed_together")
	// Before the batch, on both stores: "held" admitted for p (not q),
	// "gone" admitted and pruned.
	for _, st := range []*Store{alone, batch} {
		res, err := st.Admit(ctx, store.Admission{Event: "e", IdempotencyKey: "held", Runs: []store.NewRun{{ID: "held", Process: "p"}}, Now: now})
		if err != nil || len(res.Admitted) != 1 {
			t.Fatalf("admit held: %v %+v", err, res)
		}
		if _, err := st.pool.Exec(ctx, `INSERT INTO `+st.q.schema+`.pruned_keys (event, key, process, run_id, created_at) VALUES ('e', 'gone', 'p', 'gone', $1)`,
			now.UnixNano()); err != nil {
			t.Fatal(err)
		}
	}

	const n = 300
	as := make([]store.Admission, n)
	for i := range as {
		as[i] = store.Admission{Event: "e", IdempotencyKey: fmt.Sprintf("k%03d", i), Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
			Runs: []store.NewRun{{ID: fmt.Sprintf("r%03d", i), Process: "p", Priority: i % 3}}, Now: now}
		if i%5 == 0 || i%20 == 13 || i%20 == 17 { // a second process, held by no run before the batch
			as[i].Runs = append(as[i].Runs, store.NewRun{ID: fmt.Sprintf("r%03dq", i), Process: "q"})
		}
		if i%11 == 0 {
			as[i].NotBefore = now.Add(time.Hour)
		}
		switch {
		case i == 149:
			as[i].IdempotencyKey = "" // plain: a statement of its own between two runs of keyed admissions
		case i%10 == 3:
			as[i].IdempotencyKey = "held"
		case i%10 == 7:
			as[i].IdempotencyKey = "gone"
		case i == 101 || i == 102:
			as[i].IdempotencyKey = "k100" // admission 100's key, in the same statement
		}
	}

	want := oneAtATime(t, alone, as)
	got := admitTogether(t, batch, as, 3) // the keyed admissions before the plain one, the plain one, the keyed ones after it
	// What the keys say, in the batch's order: the first run of a key
	// and process holds it (held: before the batch); a pruned key admits
	// nothing.
	holder := map[[2]string]string{{"held", "p"}: "held"}
	for i, res := range got {
		a := &as[i]
		var w struct{ admitted, existing, pruned []string }
		for _, nr := range a.Runs {
			k := [2]string{a.IdempotencyKey, nr.Process}
			switch id, ok := holder[k]; {
			case a.IdempotencyKey == "":
				w.admitted = append(w.admitted, nr.ID)
			case k == [2]string{"gone", "p"}:
				w.pruned = append(w.pruned, "gone")
			case ok:
				w.existing = append(w.existing, id)
			default:
				holder[k] = nr.ID
				w.admitted = append(w.admitted, nr.ID)
			}
		}
		ids := func(rs []store.Run) []string {
			var out []string
			for _, r := range rs {
				out = append(out, r.ID)
			}
			return out
		}
		if g := ids(res.Admitted); !reflect.DeepEqual(g, w.admitted) {
			t.Errorf("admission %d (key %q): admitted %v, want %v", i, a.IdempotencyKey, g, w.admitted)
		}
		if g := ids(res.Existing); !reflect.DeepEqual(g, w.existing) {
			t.Errorf("admission %d (key %q): existing %v, want %v", i, a.IdempotencyKey, g, w.existing)
		}
		if g := ids(res.Pruned); !reflect.DeepEqual(g, w.pruned) {
			t.Errorf("admission %d (key %q): pruned %v, want %v", i, a.IdempotencyKey, g, w.pruned)
		}
	}
	sameAsAlone(t, alone, batch, as, got, want)
}

// insertCalls returns a function that reports how many statements have
// inserted into st's runs table since insertCalls was called, read from
// pg_stat_statements; nil (and a log line) when the server does not load
// that module. The count can only fall short, never exceed: under many
// concurrent tests the module may evict a statement's entry and start it
// again from zero, so callers check an upper bound.
func insertCalls(t *testing.T, st *Store) func() int64 {
	t.Helper()
	ctx := context.Background()
	st.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`) // a concurrent test may create it first
	read := func() (int64, error) {
		var n int64
		err := st.pool.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query LIKE $1`,
			"%INSERT INTO "+st.q.schema+".runs %").Scan(&n)
		return n, err
	}
	n0, err := read()
	if err != nil {
		t.Logf("statement counts not checked: pg_stat_statements: %v", err)
		return nil
	}
	return func() int64 {
		n, err := read()
		if err != nil {
			t.Fatal(err)
		}
		return n - n0
	}
}

// TestKeyedAdmissionsRace: two nodes admit the same keys at once, in
// batches and one at a time: each key is admitted once, by one of them,
// and the other's admission answers with that run (its insert waited for
// the first and left the run out).
func TestKeyedAdmissionsRace(t *testing.T) {
	ctx := context.Background()
	a := planStore(t, "keyed_race")
	b, err := Open(ctx, os.Getenv("YELLA_PG_URL"), Options{Schema: a.opts.Schema})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 200
	for round := range 5 {
		adms := func(node string) []store.Admission {
			as := make([]store.Admission, n)
			for i := range as {
				as[i] = store.Admission{Event: "e", IdempotencyKey: fmt.Sprintf("k%d-%d", round, i),
					Runs: []store.NewRun{{ID: fmt.Sprintf("%s%d-%d", node, round, i), Process: "p"}}, Now: time.Now()}
			}
			return as
		}
		results := make([][]store.AdmitResult, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k, st := range []*Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				as := adms(fmt.Sprint("n", k, "-"))
				if round%2 == 0 {
					results[k], errs[k] = st.AdmitBatch(ctx, as)
					return
				}
				for _, adm := range as {
					res, err := st.Admit(ctx, adm)
					if err != nil {
						errs[k] = err
						return
					}
					results[k] = append(results[k], res)
				}
			}()
		}
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				t.Fatalf("round %d, node %d: %v", round, k, err)
			}
		}
		for i := range n {
			var admitted []string
			for k := range 2 {
				for _, r := range results[k][i].Admitted {
					admitted = append(admitted, r.ID)
				}
			}
			if len(admitted) != 1 {
				t.Fatalf("round %d, key %d: admitted %v, want one run", round, i, admitted)
			}
			for k := range 2 {
				res := results[k][i]
				if len(res.Admitted)+len(res.Existing) != 1 || (len(res.Existing) == 1 && res.Existing[0].ID != admitted[0]) {
					t.Fatalf("round %d, key %d, node %d: %+v, want %s admitted or existing", round, i, k, res, admitted[0])
				}
			}
		}
	}
	ca, err := a.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ca[store.StatusIdle] != 5*n {
		t.Errorf("idle runs counted: %d, want %d", ca[store.StatusIdle], 5*n)
	}
}
