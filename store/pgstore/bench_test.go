package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// The engine on the PostgreSQL store, one engine process (one node), fleet
// concurrency 50, no-op handlers:
//
//	go test -run '^$' -bench . -benchtime 20000x ./store/pgstore
//
// Each reports runs (or emits) per second, the WAL the server wrote per
// run (pg_current_wal_lsn), and the writers' commands per transaction.

func benchEngine(b *testing.B) (*pgstore.Store, *yella.Engine) {
	b.Helper()
	st := openIn(b, b.TempDir(), pgstore.Options{})
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 50})
	if err != nil {
		b.Fatal(err)
	}
	eng.Register(yella.Process{Name: "noop", On: "ev", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	b.Cleanup(func() { eng.Stop(context.Background()) })
	return st, eng
}

func walLSN(b *testing.B, st *pgstore.Store) int64 {
	b.Helper()
	var n int64
	if err := st.Pool().QueryRow(context.Background(), "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

func report(b *testing.B, st *pgstore.Store, n int, wal0 int64, unit string) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), unit)
	b.ReportMetric(float64(walLSN(b, st)-wal0)/float64(n), "WAL-B/run")
	s := st.Stats()
	b.ReportMetric(float64(s.Commands)/float64(max(s.Batches, 1)), "cmds/batch")
}

// BenchmarkNoopDrain: b.N runs admitted (8 concurrent emitters, before the
// timer), then drained by one engine: from Start to the last completion.
func BenchmarkNoopDrain(b *testing.B) {
	st, eng := benchEngine(b)
	ctx := context.Background()
	emitConcurrently(b, eng, b.N, 8)
	wal0 := walLSN(b, st)
	b.ResetTimer()
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := eng.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	report(b, st, b.N, wal0, "runs/s")
}

// BenchmarkEmitAndDrain: 8 concurrent emitters while the engine runs,
// from the first emit to the last completion.
func BenchmarkEmitAndDrain(b *testing.B) {
	st, eng := benchEngine(b)
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	wal0 := walLSN(b, st)
	b.ResetTimer()
	emitConcurrently(b, eng, b.N, 8)
	if err := eng.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	report(b, st, b.N, wal0, "runs/s")
}

// BenchmarkEmit: one sequential emitter while the engine runs: each Emit
// is a commit of its own (p50 and p99 of Emit reported).
func BenchmarkEmit(b *testing.B) {
	st, eng := benchEngine(b)
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	wal0 := walLSN(b, st)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if _, err := eng.Emit(ctx, "ev", nil); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	report(b, st, b.N, wal0, "emits/s")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	eng.Drain(ctx)
}

func emitConcurrently(b *testing.B, eng *yella.Engine, n, emitters int) {
	b.Helper()
	var wg sync.WaitGroup
	for w := range emitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += emitters {
				if _, err := eng.Emit(context.Background(), "ev", nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkClaimNextFlow: one claim of one run, at the store, with a
// backlog of 10,000 idle runs in front of it: of a process without flow
// limits (plain: the backlog is claimable, the claim takes its first run),
// and of a concurrency key at its limit, which the flow claim passes over
// to claim a later run of another key (busy-key); and with 10,000 runs
// of the process waiting until an hour later instead (sleepers: the
// claim takes the one idle run). Reports
// claims per second (the run's admission and completion are outside the
// timer):
//
//	go test -run '^$' -bench ClaimNextFlow -benchtime 500x ./store/pgstore
func BenchmarkClaimNextFlow(b *testing.B) {
	for _, c := range []struct {
		name     string
		flow     map[string]store.Flow
		sleepers bool
	}{
		{"plain", nil, false},
		{"busy-key", map[string]store.Flow{"p": {KeyConcurrency: 1}}, false},
		{"sleepers", nil, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			st := openIn(b, b.TempDir(), pgstore.Options{})
			now := time.Now()
			admitKeyed := func(key string, n int) {
				runs := make([]store.NewRun, n)
				for i := range runs {
					runs[i] = store.NewRun{ID: newID("r"), Process: "p", ConcurrencyKey: key}
				}
				if _, err := st.Admit(ctx, store.Admission{Event: "ev", Runs: runs, Now: now}); err != nil {
					b.Fatal(err)
				}
			}
			req := store.ClaimNextRequest{Owner: "o", Now: now, LeaseUntil: now.Add(time.Hour), Processes: map[string]int{"p": 0}, Flows: c.flow, Limit: 1}
			admitKeyed("a", 1)
			if res, err := st.ClaimNext(ctx, req); err != nil || len(res.Runs) != 1 {
				b.Fatalf("first claim: %v", err)
			}
			for range 10 {
				admitKeyed("a", 1000)
			}
			if c.sleepers { // as the wait action leaves them, without a claim and a wait each
				if _, err := st.Pool().Exec(ctx, "UPDATE "+st.Schema()+".runs SET status = 'waiting', retry_at = $1 WHERE status = 'idle'",
					now.Add(time.Hour).UnixNano()); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := st.Pool().Exec(ctx, "ANALYZE "+st.Schema()+".runs"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				admitKeyed(fmt.Sprint("b", i), 1)
				req.Now = req.Now.Add(time.Millisecond)
				b.StartTimer()
				res, err := st.ClaimNext(ctx, req)
				b.StopTimer()
				if err != nil || len(res.Runs) != 1 {
					b.Fatalf("claim: %v, %d runs", err, len(res.Runs))
				}
				if c.flow != nil {
					r := res.Runs[0]
					if _, err := st.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Action: store.ActionComplete, Now: req.Now}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
		})
	}
}

// BenchmarkAdmit: admissions of one run each at the store, sequential
// (each a commit of its own: p50 reported) and from 8 goroutines at once
// (batched by the writers): without a key (plain), with an idempotency
// key seen once (keyed: each looks its key up and admits), to a process
// with a bound never reached (bounded: each takes the process's admission
// lock and counts its active runs), both (keyed-bounded: each looks its
// key up, then locks and counts), and as Singletons of keys seen once
// (singleton: each takes its group's lock and looks the group up, and
// admits). Reports admissions per second:
//
//	go test -run '^$' -bench Admit -benchtime 3000x ./store/pgstore
func BenchmarkAdmit(b *testing.B) {
	for _, kind := range []string{"plain", "keyed", "bounded", "keyed-bounded", "singleton"} {
		for _, par := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/par%d", kind, par), func(b *testing.B) {
				ctx := context.Background()
				st := openIn(b, b.TempDir(), pgstore.Options{})
				lat := make([]time.Duration, b.N)
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range par {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := w; i < b.N; i += par {
							a := store.Admission{Event: "ev", Runs: []store.NewRun{{ID: newID("r"), Process: "p"}}}
							switch kind {
							case "keyed":
								a.IdempotencyKey = a.Runs[0].ID
							case "bounded":
								a.Runs[0].Limit = 1 << 30
							case "keyed-bounded":
								a.IdempotencyKey, a.Runs[0].Limit = a.Runs[0].ID, 1<<30
							case "singleton":
								a.Runs[0].GroupKey, a.Runs[0].Group = a.Runs[0].ID, store.GroupSingleton
							}
							t0 := time.Now()
							a.Now = t0
							res, err := st.Admit(ctx, a)
							lat[i] = time.Since(t0)
							if err != nil || len(res.Admitted) != 1 {
								b.Errorf("admit: %v %+v", err, res)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "admits/s")
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			})
		}
	}
}

// BenchmarkAdmitBatch: batches of 500 admissions of one run each, one
// batch at a time: without keys (plain), each with an idempotency key
// seen once (keyed), each with a key of which half were admitted by the
// batch before (redelivered: a webhook source sending again what it
// sent), children of one stored run (children: a fan-out), and runs of a
// process with a cap of 5 and the default queue of 1,000 (bounded: each
// admission counts the process's active runs; once 1,005 are, the rest
// are dropped). Reports admissions (decided) per second:
//
//	go test -run '^$' -bench AdmitBatch -benchtime 40x ./store/pgstore
func BenchmarkAdmitBatch(b *testing.B) {
	const size = 500
	for _, kind := range []string{"plain", "keyed", "redelivered", "children", "bounded"} {
		b.Run(kind, func(b *testing.B) {
			ctx := context.Background()
			st := openIn(b, b.TempDir(), pgstore.Options{})
			if _, err := st.Admit(ctx, store.Admission{Event: "ev", Runs: []store.NewRun{{ID: "parent", Process: "p"}}, Now: time.Now()}); err != nil {
				b.Fatal(err)
			}
			var prev []string // the keys of the batch before
			b.ResetTimer()
			for range b.N {
				as := make([]store.Admission, size)
				keys := make([]string, size)
				for i := range as {
					id := newID("r")
					keys[i] = id
					if kind == "redelivered" && i%2 == 1 && prev != nil {
						keys[i] = prev[i]
					}
					as[i] = store.Admission{Event: "ev", Runs: []store.NewRun{{ID: id, Process: "p"}}, Now: time.Now()}
					switch kind {
					case "keyed", "redelivered":
						as[i].IdempotencyKey = keys[i]
					case "children":
						as[i].ParentID, as[i].CorrelationID, as[i].Depth = "parent", "parent", 1
					case "bounded":
						as[i].Runs[0].Limit = 1005
					}
				}
				prev = keys
				res, err := st.AdmitBatch(ctx, as)
				if err != nil || len(res) != size {
					b.Fatalf("admit batch: %v (%d results)", err, len(res))
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "admits/s")
		})
	}
}
