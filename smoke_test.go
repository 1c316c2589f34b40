package yella_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/memstore"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	eng.Register(yella.Process{Name: "a", On: "go", Run: func(c *yella.Ctx) yella.Result {
		v, err := yella.Effect(c, "x", func(ctx context.Context) (int, error) { calls++; return 41, nil })
		if err != nil {
			return c.Error(err)
		}
		if c.Attempt() == 1 {
			return c.Error(errors.New("boom"))
		}
		return c.OK(v+1, yella.Then("next"))
	}, Retry: &yella.Retry{Max: 2, Backoff: yella.Fixed(time.Millisecond)}})
	eng.Register(yella.Process{Name: "b", On: "next", Run: func(c *yella.Ctx) yella.Result {
		var n int
		c.Decode(&n)
		return c.OK(n * 2)
	}})
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runs, err := eng.EmitAndWait(ctx, "go", map[string]int{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	chain, _ := eng.Chain(ctx, runs[0].ID)
	for _, r := range chain {
		t.Logf("%s %s %s attempts=%d out=%s err=%s", r.Process, r.Status, r.ID, r.Attempts, r.Output, r.Error)
	}
	if calls != 1 || len(chain) != 2 || string(chain[1].Output) != "84" {
		t.Fatalf("calls=%d chain=%d", calls, len(chain))
	}
	if err := eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	m, _ := eng.Metrics(ctx)
	t.Logf("%+v", m.Totals)
	rep, err := eng.Observability(ctx, yella.ObservabilityQuery{})
	t.Logf("%+v %v", rep.Summary.Runs, err)
}
