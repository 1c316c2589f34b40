package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// BenchmarkStoreLifecycle measures the store alone: admit, claim and
// complete b.N runs from 50 concurrent workers, as the engine does.
func BenchmarkStoreLifecycle(b *testing.B) {
	st, err := sqlitestore.Open(filepath.Join(b.TempDir(), "b.db"), sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	const workers = 50
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/workers + 1
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				now := time.Now()
				res, err := st.Admit(ctx, store.Admission{Event: "e", Payload: []byte(`{"i":1}`), Runs: []store.NewRun{{ID: newID(), Process: "p"}}, Now: now})
				if err != nil {
					panic(err)
				}
				id := res.Admitted[0].ID
				rs, err := st.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
				if err != nil || len(rs) != 1 {
					panic(fmt.Sprint(err))
				}
				if _, err := st.Update(ctx, store.Update{RunID: id, Epoch: rs[0].Epoch, Now: now, To: store.StatusCompleted}); err != nil {
					panic(err)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	s := st.Stats()
	b.ReportMetric(float64(per*workers)/b.Elapsed().Seconds(), "runs/s")
	b.ReportMetric(float64(s.Commands)/float64(s.Batches), "cmds/batch")
}

// BenchmarkStoreAdmit measures admissions alone, from 50 concurrent
// callers, as an engine emitting events does: one run each, a small
// payload, no idempotency key.
func BenchmarkStoreAdmit(b *testing.B) {
	benchAdmit(b, func(int) store.NewRun { return store.NewRun{ID: newID(), Process: "p"} })
}

// BenchmarkStoreAdmitDebounce measures grouped admissions: each of the 50
// callers debounces into its own group's idle run (a lookup by
// runs_group, an update of the run and a timeline entry), after its first
// admission.
func BenchmarkStoreAdmitDebounce(b *testing.B) {
	benchAdmit(b, func(i int) store.NewRun {
		return store.NewRun{ID: newID(), Process: "p", GroupKey: fmt.Sprint("k", i), Group: store.GroupDebounce}
	})
}

// benchAdmit admits b.N runs from 50 concurrent callers, run(i) being the
// i-th caller's run.
func benchAdmit(b *testing.B, run func(caller int) store.NewRun) {
	st, err := sqlitestore.Open(filepath.Join(b.TempDir(), "b.db"), sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	const workers = 50
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/workers + 1
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if _, err := st.Admit(ctx, store.Admission{Event: "e", Payload: []byte(`{"i":1}`), Runs: []store.NewRun{run(i)}, Now: time.Now()}); err != nil {
					panic(err)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(per*workers)/b.Elapsed().Seconds(), "runs/s")
}
