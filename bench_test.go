package yella_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Engine benchmarks on both stores. examples/capacity measures the same
// work in fresh processes, beside reference figures; these keep the numbers
// in the Go benchmark format for benchstat.

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
	drainBench(b, oneEffect)
}

// oneEffect is a handler that runs one durable effect, whose result is
// the run's output.
func oneEffect(c *yella.Ctx) yella.Result {
	v, err := yella.Effect(c, "e1", func(context.Context) (int, error) { return 1, nil })
	if err != nil {
		return c.Error(err)
	}
	return c.OK(v)
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

// webhookPayload is a webhook body of a realistic shape: about 1.5 KB,
// nested five levels, with non-ASCII text.
var webhookPayload = json.RawMessage(`{"id":"evt_1Nq8xY2eZvKYlo2C","object":"event","api_version":"2024-06-20","created":1718900000,` +
	`"data":{"object":{"id":"pi_3Nq8xX2eZvKYlo2C1","object":"payment_intent","amount":4200,"currency":"eur","status":"succeeded",` +
	`"customer":{"id":"cus_Q1","name":"Zoë Ångström","email":"zoe@example.com","address":{"line1":"Kärntner Straße 1","city":"Wien","country":"AT"}},` +
	`"charges":{"data":[{"id":"ch_1","amount":4200,"paid":true,"outcome":{"network_status":"approved_by_network","risk_level":"normal","risk_score":12,"seller_message":"Payment complete."}},` +
	`{"id":"ch_2","amount":0,"paid":false,"outcome":{"network_status":"declined_by_network","risk_level":"elevated","risk_score":71,"seller_message":"The bank did not return any further details."}}],"has_more":false},` +
	`"metadata":{"order_id":"ord_8841","cart":"[\"sku-1\",\"sku-2\"]","note":"Lieferung bitte an die Hintertür — danke!"},` +
	`"payment_method_types":["card","sepa_debit","ideal"],"description":"Bestellung 8841: 2 Artikel"}},` +
	`"livemode":false,"pending_webhooks":1,"request":{"id":"req_abc123","idempotency_key":"8c1f1b6e-1c1e-4c9e-9d7a-3f0e5f1a2b3c"},"type":"payment_intent.succeeded"}`)

// BenchmarkEmitPayload times sequential emits of a 1.5 KB webhook body,
// raw (validated as given) and as a Go value (encoded by the engine).
func BenchmarkEmitPayload(b *testing.B) {
	var decoded map[string]any
	if err := json.Unmarshal(webhookPayload, &decoded); err != nil {
		b.Fatal(err)
	}
	for _, p := range []struct {
		name string
		v    any
	}{{"raw", webhookPayload}, {"value", decoded}} {
		b.Run(p.name, func(b *testing.B) {
			eng, _ := yella.New(yella.Config{Store: memstore.New()})
			eng.Register(yella.Process{Name: "sink", On: "e", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
			ctx := context.Background()
			b.SetBytes(int64(len(webhookPayload)))
			b.ResetTimer()
			for range b.N {
				if _, err := eng.Emit(ctx, "e", p.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInFlight starts b.N handlers that each block until released
// (at least 1,000) and reports, once all are running and after a garbage
// collection, the goroutine stack and the live heap each one holds: the
// cost of many slow handlers in flight, which the capacity tool's
// inflight-10k measures as RSS.
func BenchmarkInFlight(b *testing.B) {
	for name, open := range stores(b) {
		b.Run(name, func(b *testing.B) {
			n := max(b.N, 1000)
			st := open()
			defer st.Close()
			release := make(chan struct{})
			var started sync.WaitGroup
			started.Add(n)
			eng, _ := yella.New(yella.Config{Store: st, Concurrency: n})
			eng.Register(yella.Process{Name: "p", On: "e", Run: func(c *yella.Ctx) yella.Result {
				started.Done()
				select {
				case <-release:
				case <-c.Done():
				}
				return c.OK(nil)
			}})
			ctx := context.Background()
			if err := eng.Start(ctx); err != nil {
				b.Fatal(err)
			}
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			g0 := runtime.NumGoroutine()
			for i := range n {
				if _, err := eng.Emit(ctx, "e", i); err != nil {
					b.Fatal(err)
				}
			}
			started.Wait()
			runtime.GC()
			runtime.GC() // the first may find stacks still in use by their setup
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			g := runtime.NumGoroutine() - g0
			b.ReportMetric(float64(after.StackInuse-before.StackInuse)/float64(n), "stack-B/handler")
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "heap-B/handler")
			b.ReportMetric(float64(g)/float64(n), "goroutines/handler")
			close(release)
			if err := eng.Drain(ctx); err != nil {
				b.Fatal(err)
			}
			eng.Stop(ctx)
		})
	}
}
