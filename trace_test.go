package yella_test

import (
	"context"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store/memstore"
)

// TestTrace: a chain with fan-out and an approval gate traces as a
// depth-first tree with the held approval as a gap, on a fake clock so
// every time is exact.
func TestTrace(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(c *yella.Ctx) yella.Result { return c.OK(nil) }
	eng.Register(yella.Process{Name: "draft", On: "start", Run: func(c *yella.Ctx) yella.Result { return c.Defer("approved", nil) }})
	eng.Register(yella.Process{Name: "publish", On: "approved", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil, yella.Then("published")) }})
	eng.Register(yella.Process{Name: "notify", On: "published", Run: ok})
	eng.Register(yella.Process{Name: "index", On: "published", Run: ok})
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	runs, err := eng.EmitAndWait(ctx, "start", nil)
	if err != nil {
		t.Fatal(err)
	}
	root := runs[0]
	clk.Advance(90 * time.Second) // the approval takes a while
	if _, err := eng.Resume(ctx, root.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	tr, err := eng.Trace(ctx, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sp := range tr.Spans {
		got = append(got, sp.Process+"@"+string(rune('0'+sp.Level)))
	}
	want := []string{"draft@0", "publish@1", "notify@2", "index@2"}
	if len(got) != len(want) {
		t.Fatalf("spans %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("spans %v, want %v", got, want)
		}
	}
	if len(tr.Gaps) != 1 || tr.Gaps[0].ParentID != root.ID || tr.Paused != 90*time.Second {
		t.Fatalf("gaps %+v paused %v, want one 90s gap after the draft", tr.Gaps, tr.Paused)
	}
	if tr.CorrelationID != root.ID || !tr.Start.Equal(t0) || !tr.End.Equal(t0.Add(90*time.Second)) {
		t.Fatalf("trace %s from %v to %v", tr.CorrelationID, tr.Start, tr.End)
	}
	for _, sp := range tr.Spans {
		if sp.Status != yella.StatusCompleted && sp.Status != yella.StatusDeferred || sp.EndedAt.IsZero() || sp.StartedAt.IsZero() || sp.Attempts != 1 {
			t.Fatalf("span %+v", sp)
		}
	}
	if _, err := eng.Trace(ctx, "no-such-run"); yella.CodeOf(err) != yella.CodeRunNotFound {
		t.Fatalf("trace of an unknown run: %v", err)
	}
}
