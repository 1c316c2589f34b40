package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

// FuzzRunsDifferential compares run listings of the SQLite store with the
// in-memory reference, on the same history (chains, failures, several
// processes), for any filter: the same runs in the same order, or the same
// refusal. Filter values reach SQL only as bound arguments, so quotes,
// wildcards and comment markers in them match nothing but themselves.
func FuzzRunsDifferential(f *testing.F) {
	f.Add("a", "", "", "", -1, int64(0), 10, false, 0)
	f.Add("", "next", "completed", "", 2, int64(0), 0, false, 1)
	f.Add("b", "go", "errored", "errored", -1, int64(12), 3, true, 0)
	f.Add("' OR '1'='1", "%", "", "", -1, int64(-4), 5000, false, 1)
	f.Add("", "", "", "completed", 7, int64(40), 2, true, 0)
	f.Add("a\x00", "go;--", "idle", "bogus", 100, int64(1<<62), -3, false, 9)
	engines := map[string]*yella.Engine{}
	for _, kind := range []string{"memory", "sqlite"} {
		var st store.Store = memstore.New()
		if kind == "sqlite" {
			s, err := sqlitestore.Open(filepath.Join(f.TempDir(), "fuzz.db"), sqlitestore.Options{})
			if err != nil {
				f.Fatal(err)
			}
			f.Cleanup(func() { s.Close() })
			st = s
		}
		// One at a time, so both stores see the same order of admissions.
		eng, err := yella.New(yella.Config{Store: st, Concurrency: 1})
		if err != nil {
			f.Fatal(err)
		}
		eng.Register(yella.Process{Name: "a", On: "go", Run: func(c *yella.Ctx) yella.Result {
			var n int
			c.Decode(&n)
			if n%5 == 4 {
				return c.Fail(errors.New("no"))
			}
			return c.OK(n, yella.Then("next"))
		}})
		eng.Register(yella.Process{Name: "b", On: "go", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
		eng.Register(yella.Process{Name: "c", On: "next", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
		ctx := context.Background()
		if err := eng.Start(ctx); err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { eng.Stop(ctx) })
		for i := range 20 {
			if _, err := eng.EmitAndWait(ctx, "go", i); err != nil {
				f.Fatal(err)
			}
			if err := eng.Drain(ctx); err != nil {
				f.Fatal(err)
			}
		}
		engines[kind] = eng
	}
	// rootOf maps a root's position to its correlation id in each store.
	roots := map[string][]string{}
	for kind, eng := range engines {
		page, err := eng.Runs(context.Background(), yella.RunQuery{RootOnly: true, Order: yella.OldestFirst, Limit: yella.MaxPageSize})
		if err != nil {
			f.Fatal(err)
		}
		for _, r := range page.Runs {
			roots[kind] = append(roots[kind], r.CorrelationID)
		}
	}
	f.Fuzz(func(t *testing.T, process, event, status, state string, corr int, after int64, limit int, rootOnly bool, order int) {
		type answer struct {
			seqs []string
			code yella.Code
		}
		got := map[string]answer{}
		for kind, eng := range engines {
			q := yella.RunQuery{Process: process, Event: event, State: yella.State(state), RootOnly: rootOnly, Order: yella.Order(order), Limit: limit}
			if status != "" {
				q.Status = []yella.Status{yella.Status(status)}
			}
			if corr >= 0 && corr < len(roots[kind]) {
				q.CorrelationID = roots[kind][corr]
			} else if corr >= 0 {
				q.CorrelationID = fmt.Sprint(corr)
			}
			if after != 0 {
				q.Cursor = fmt.Sprintf("s%d", after)
			}
			page, err := eng.Runs(context.Background(), q)
			var a answer
			a.code = yella.CodeOf(err)
			if err != nil && a.code != yella.CodeInvalidQuery {
				t.Fatalf("%s: %+v: %v", kind, q, err)
			}
			for _, r := range page.Runs {
				payload, _ := json.Marshal(r.Payload)
				a.seqs = append(a.seqs, fmt.Sprintf("%d %s %s %s %d %s", r.Seq, r.Process, r.Event, r.Status, r.Depth, payload))
			}
			got[kind] = a
		}
		m, s := got["memory"], got["sqlite"]
		if m.code != s.code || !slices.Equal(m.seqs, s.seqs) {
			t.Fatalf("memory and sqlite differ:\nmemory (%s): %v\nsqlite (%s): %v", m.code, m.seqs, s.code, s.seqs)
		}
	})
}
