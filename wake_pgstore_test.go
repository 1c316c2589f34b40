package yella_test

import (
	"context"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
	"github.com/yella-go/yella/yellatest"
)

// lateClaims is a shared store whose claims that claim a run and leave
// another waiting for a time answer once the clock has reached that time,
// as a slow answer on a busy machine may: the clock moves while the store
// answers.
type lateClaims struct {
	*pgstore.Store
	clk *yellatest.Clock
}

func (l *lateClaims) ClaimNext(ctx context.Context, req store.ClaimNextRequest) (store.ClaimNextResult, error) {
	res, err := l.Store.ClaimNext(ctx, req)
	if err == nil && len(res.Runs) > 0 && !res.NextAt.IsZero() {
		l.clk.Set(res.NextAt)
	}
	return res, err
}

// A run that falls due while the store answers the claim that reported
// its time is claimed at once: the engine does not arm a timer for a time
// the clock has already reached (a fake clock would fire it only at its
// next advance, which may never come). Whether another wake-up happens to
// be pending then is chance, so the case is made several times.
func TestSharedWakeAlreadyDue(t *testing.T) {
	if why := pgSkip(); why != "" {
		t.Skip(why)
	}
	ctx := context.Background()
	clk := yellatest.NewClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	st := &lateClaims{Store: pgFactory().Open(t, t.TempDir()).(*pgstore.Store), clk: clk}
	const rounds = 6
	e, err := yella.New(yella.Config{Store: st, Clock: clk, Concurrency: rounds + 1})
	if err != nil {
		t.Fatal(err)
	}
	// Each round's first run holds its slot until the test ends, so that
	// its end does not make the engine claim again.
	ran, hold := make(chan string, 2*rounds), make(chan struct{})
	if err := e.Register(yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result {
		var what string
		c.Decode(&what)
		ran <- what
		if what == "hold" {
			<-hold
		}
		return c.OK(nil)
	}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	defer close(hold) // before Stop, which waits for the held runs
	for round := range rounds {
		// Two delayed runs: the first is claimed at its time, by the timer
		// its emission armed; that claim reports the second's time, a
		// millisecond later, which the clock reaches before the claim
		// answers.
		for _, r := range []struct {
			what string
			d    time.Duration
		}{{"hold", 5 * time.Second}, {"go", 5*time.Second + time.Millisecond}} {
			if _, err := e.Emit(ctx, "ev", r.what, yella.Delay(r.d)); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(5 * time.Second)
		for range 2 {
			select {
			case <-ran:
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: a run that fell due while the claim that reported its time was answered waited for a clock advance", round)
			}
		}
	}
}
