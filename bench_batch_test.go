package yella_test

import (
	"context"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

// BenchmarkEmitBatch times EmitBatch of 500 events on a stopped engine
// (admission only), reported per event.
func BenchmarkEmitBatch(b *testing.B) {
	for name, open := range stores(b) {
		b.Run(name, func(b *testing.B) {
			st := open()
			defer st.Close()
			eng, _ := yella.New(yella.Config{Store: st})
			eng.Register(yella.Process{Name: "sink", On: "e", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i += 500 {
				evs := make([]yella.BatchEvent, min(500, b.N-i))
				for j := range evs {
					evs[j] = yella.BatchEvent{Event: "e", Payload: i + j}
				}
				if _, err := eng.EmitBatch(ctx, evs); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkEndToEnd times b.N no-op runs end to end on a started engine:
// from the first EmitBatch (500 events each) to the last completion, so
// admission is inside the window, at fleet concurrency 50.
func BenchmarkEndToEnd(b *testing.B) {
	endToEnd(b, func(c *yella.Ctx) yella.Result { return c.OK(nil) })
}

// BenchmarkEndToEndEffect is BenchmarkEndToEnd with one durable effect
// per run: its start is written before its body runs, its result before
// the run's end.
func BenchmarkEndToEndEffect(b *testing.B) {
	endToEnd(b, oneEffect)
}

// endToEnd times b.N runs of handler run end to end, on every store.
func endToEnd(b *testing.B, run func(c *yella.Ctx) yella.Result) {
	for name, open := range stores(b) {
		b.Run(name, func(b *testing.B) {
			st := open()
			defer st.Close()
			eng, _ := yella.New(yella.Config{Store: st, Concurrency: 50})
			eng.Register(yella.Process{Name: "p", On: "e", Run: run})
			ctx := context.Background()
			if err := eng.Start(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += 500 {
				evs := make([]yella.BatchEvent, min(500, b.N-i))
				for j := range evs {
					evs[j] = yella.BatchEvent{Event: "e", Payload: i + j}
				}
				if _, err := eng.EmitBatch(ctx, evs); err != nil {
					b.Fatal(err)
				}
			}
			if err := eng.Drain(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
			if s, ok := st.(interface{ Stats() sqlitestore.Stats }); ok {
				// The writer's time per run: the SQLite store's bound, and
				// steadier than runs/s on a shared machine.
				st := s.Stats()
				b.ReportMetric(float64(st.CommitNanos)/float64(b.N), "writer-ns/run")
				b.ReportMetric(float64(st.Commands)/float64(st.Batches), "cmds/batch")
			}
			eng.Stop(ctx)
		})
	}
}
