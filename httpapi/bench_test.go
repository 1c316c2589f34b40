package httpapi_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/store/sqlitestore"
)

// benchEngine is a started engine on a SQLite file holding n completed
// runs of two processes.
func benchEngine(b *testing.B, n int) *yella.Engine {
	b.Helper()
	st, err := sqlitestore.Open(filepath.Join(b.TempDir(), "api.db"), sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 50})
	if err != nil {
		b.Fatal(err)
	}
	ok := func(c *yella.Ctx) yella.Result { return c.OK(map[string]int{"n": 1}) }
	eng.Register(yella.Process{Name: "a", On: "ev", Run: ok})
	eng.Register(yella.Process{Name: "b", On: "other", Run: ok})
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Stop(ctx) })
	for i := range n {
		ev := "ev"
		if i%4 == 0 {
			ev = "other"
		}
		if _, err := eng.Emit(ctx, ev, map[string]int{"i": i}); err != nil {
			b.Fatal(err)
		}
	}
	if err := eng.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	return eng
}

// BenchmarkRunsList10k is a page of the run list (the dashboard's and the
// CLI's main query) on a database of 10,000 runs, through the full HTTP
// handler: the target is well under 50 ms per page.
func BenchmarkRunsList10k(b *testing.B) {
	eng := benchEngine(b, 10000)
	api := httpapi.New(eng, httpapi.Options{})
	defer api.Close()
	for _, q := range []string{"limit=50", "limit=50&process=b", "limit=50&status=completed&root=true&total=true", "limit=50&cursor=s5000"} {
		b.Run(q, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				api.ServeHTTP(w, httptest.NewRequest("GET", "/api/runs?"+q, nil))
				if w.Code != 200 {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}

// BenchmarkSSE pushes runs through the engine as fast as it admits them
// while a client reads the event stream, and reports the runs per second
// the stream delivered (all three events of each run: admitted, started,
// completed). Keeping up with 1,000 runs/s means runs/s ≥ 1000 with 0
// resets.
func BenchmarkSSE(b *testing.B) {
	eng := benchEngine(b, 0)
	api := httpapi.New(eng, httpapi.Options{Replay: 1 << 16})
	srv := httptest.NewServer(api)
	defer srv.Close()
	defer api.Close()
	ctx := context.Background()
	for b.Loop() {
		const runs = 5000
		resp, err := http.Get(srv.URL + "/api/events")
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		got := make(chan [2]int, 1)
		go func() {
			completes, resets := 0, 0
			for sc.Scan() {
				line := sc.Text()
				switch {
				case line == "event: run:completed":
					completes++
				case line == "event: reset":
					resets++
				}
				if completes == runs {
					break
				}
			}
			got <- [2]int{completes, resets}
		}()
		start := time.Now()
		for i := range runs {
			if _, err := eng.Emit(ctx, "ev", i); err != nil {
				b.Fatal(err)
			}
		}
		var res [2]int
		select {
		case res = <-got:
		case <-time.After(60 * time.Second):
			b.Fatal("the stream fell behind by more than a minute")
		}
		resp.Body.Close()
		el := time.Since(start)
		if res[0] != runs || res[1] != 0 {
			b.Fatalf("delivered %d of %d completions, %d resets", res[0], runs, res[1])
		}
		b.ReportMetric(float64(runs)/el.Seconds(), "runs/s")
	}
}
