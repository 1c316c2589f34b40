package yella_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store/memstore"
)

// records keeps the log records of a slog handler.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.list = append(r.list, rec)
	r.mu.Unlock()
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// drops returns the "dropped" counts of the warn lines about process.
func (r *records) drops(process string) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for _, rec := range r.list {
		if rec.Level != slog.LevelWarn || !strings.Contains(rec.Message, "dropped") {
			continue
		}
		var p string
		var n int64
		rec.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "process":
				p = a.Value.String()
			case "dropped":
				n = a.Value.Int64()
			}
			return true
		})
		if p == process {
			out = append(out, n)
		}
	}
	return out
}

// A drop is logged at warn level at once, later ones at most once per
// process every 10 seconds with the count since the previous line, and
// the count still owed is logged by the next flush or at Stop.
func TestDropsAreLoggedRateLimited(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	logs := &records{}
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clk, Logger: slog.New(logs), FlushInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	block := make(chan struct{})
	defer close(block)
	for _, name := range []string{"a", "b"} {
		eng.Register(yella.Process{Name: name, On: "ev", Concurrency: 1, Overflow: yella.Drop,
			Run: func(c *yella.Ctx) yella.Result { <-block; return c.OK(nil) }})
	}
	ctx := context.Background()
	emit := func() {
		t.Helper()
		if _, err := eng.Emit(ctx, "ev", nil); err != nil {
			t.Fatal(err)
		}
	}
	emit() // fills both caps (the engine is not started: the runs stay idle)
	emit() // dropped for a and b: logged at once
	if got := logs.drops("a"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("after the first drop: lines %v, want [1]", got)
	}
	for range 5 {
		emit()
	}
	clk.Advance(9 * time.Second)
	emit()
	if got := logs.drops("a"); len(got) != 1 {
		t.Fatalf("within 10s: lines %v, want one", got)
	}
	clk.Advance(time.Second)
	emit() // 10s after the first line: 6 pending + this one
	if got := logs.drops("a"); len(got) != 2 || got[1] != 7 {
		t.Fatalf("after 10s: lines %v, want [1 7]", got)
	}
	emit()
	emit()
	if err := eng.Stop(ctx); err != nil { // owes 2 drops per process
		t.Fatal(err)
	}
	for _, p := range []string{"a", "b"} {
		if got := logs.drops(p); len(got) != 3 || got[0]+got[1]+got[2] != 10 {
			t.Fatalf("process %s: lines %v, want 3 lines logging all 10 drops", p, got)
		}
	}
}
