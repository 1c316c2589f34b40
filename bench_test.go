package yella_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Engine benchmarks on both stores. examples/capacity measures the same
// work in fresh processes and prints the figures with the seed's beside
// them; these keep the numbers in the Go benchmark format for benchstat.

func stores(b *testing.B) map[string]func() store.Store {
	return map[string]func() store.Store{
		"memory": func() store.Store { return memstore.New() },
		"sqlite": func() store.Store {
			st, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"), sqlitestore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return st
		},
	}
}

// drainBench admits b.N runs from 8 goroutines on a stopped engine, then
// times Start → drained at fleet concurrency 50.
func drainBench(b *testing.B, run func(*yella.Ctx) yella.Result) {
	for name, open := range stores(b) {
		b.Run(name, func(b *testing.B) {
			st := open()
			defer st.Close()
			eng, _ := yella.New(yella.Config{Store: st, Concurrency: 50})
			eng.Register(yella.Process{Name: "p", On: "e", Run: run})
			ctx := context.Background()
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := g; i < b.N; i += 8 {
						if _, err := eng.Emit(ctx, "e", i); err != nil {
							panic(err)
						}
					}
				}()
			}
			wg.Wait()
			b.ResetTimer()
			if err := eng.Start(ctx); err != nil {
				b.Fatal(err)
			}
			if err := eng.Drain(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
			eng.Stop(ctx)
		})
	}
}

func BenchmarkDrainNoop(b *testing.B) {
	drainBench(b, func(c *yella.Ctx) yella.Result { return c.OK(nil) })
}

func BenchmarkDrainEffect(b *testing.B) {
	drainBench(b, func(c *yella.Ctx) yella.Result {
		v, err := yella.Effect(c, "e1", func(context.Context) (int, error) { return 1, nil })
		if err != nil {
			return c.Error(err)
		}
		return c.OK(v)
	})
}

// BenchmarkEmit times sequential emits (admission only).
func BenchmarkEmit(b *testing.B) {
	for name, open := range stores(b) {
		b.Run(name, func(b *testing.B) {
			st := open()
			defer st.Close()
			eng, _ := yella.New(yella.Config{Store: st})
			eng.Register(yella.Process{Name: "sink", On: "e", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				if _, err := eng.Emit(ctx, "e", i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
