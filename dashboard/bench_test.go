package dashboard_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

// BenchmarkPages renders the main pages over 10,000 runs (idle: the engine
// is not started) on each store. The target: a list page in under 50 ms.
func BenchmarkPages(b *testing.B) {
	b.Run("memstore", func(b *testing.B) { benchPages(b, memstore.New()) })
	b.Run("sqlite", func(b *testing.B) {
		st, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"), sqlitestore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		benchPages(b, st)
	})
}

func benchPages(b *testing.B, st store.Store) {
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Stop(context.Background())
	eng.Register(yella.Process{Name: "work", On: "job", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	for i := 0; i < 10000; i++ {
		if _, err := eng.Emit(context.Background(), "job", map[string]int{"n": i}); err != nil {
			b.Fatal(err)
		}
	}
	h, err := dashboard.New(eng, dashboard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, target := range []string{"/runs", "/runs?process=work&status=idle", "/", "/dead", "/processes"} {
		b.Run(target, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}
