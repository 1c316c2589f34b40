package dispatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

func TestPriorityOrder(t *testing.T) {
	d, r, _ := newD(1)
	d.Add(Item{ID: "old", Seq: 1, Rank: 100}, Item{ID: "urgent", Seq: 2, Rank: 50}, Item{ID: "new", Seq: 3, Rank: 100})
	d.Resume()
	eq(t, "first", r.ids(), []string{"urgent"})
	d.Done(Item{ID: "urgent"})
	d.Done(Item{ID: "old"})
	eq(t, "all", r.ids(), []string{"urgent", "old", "new"})
}

// A rate key starts Burst items at once, then one per Interval, and the
// waiting ones start in order when the clock allows them; items of other
// keys and without a key are not held back.
func TestRateLimitPerKey(t *testing.T) {
	d, r, clk := newD(100)
	d.SetFlow("p", store.Flow{Rate: store.Rate{Interval: time.Second, Burst: 2}})
	d.Resume()
	var items []Item
	for i := range 5 {
		items = append(items, Item{ID: fmt.Sprintf("a%d", i), Seq: int64(i + 1), Process: "p", Flow: FlowOf("a", "")})
	}
	items = append(items, Item{ID: "b0", Seq: 10, Process: "p", Flow: FlowOf("b", "")}, Item{ID: "q", Seq: 11, Process: "q"})
	d.Add(items...)
	eq(t, "burst", r.ids(), []string{"a0", "a1", "b0", "q"})
	if st := d.Stats(); st.RateWait != 3 || st.Ready != 0 {
		t.Fatalf("stats %+v", st)
	}
	clk.Advance(999 * time.Millisecond)
	eq(t, "before the interval", r.ids(), []string{"a0", "a1", "b0", "q"})
	clk.Advance(time.Millisecond)
	eq(t, "one interval", r.ids(), []string{"a0", "a1", "b0", "q", "a2"})
	clk.Advance(10 * time.Second)
	eq(t, "later", r.ids(), []string{"a0", "a1", "b0", "q", "a2", "a3", "a4"})
	// Ten seconds idle refilled the burst, no more.
	d.Add(Item{ID: "a5", Seq: 20, Process: "p", Flow: FlowOf("a", "")}, Item{ID: "a6", Seq: 21, Process: "p", Flow: FlowOf("a", "")}, Item{ID: "a7", Seq: 22, Process: "p", Flow: FlowOf("a", "")})
	eq(t, "refilled", r.ids()[7:], []string{"a5", "a6"})
}

// Starts never exceed Burst + elapsed/Interval for a key, however items
// arrive; the state handed to each claim is the key's new state.
func TestRateLimitNeverExceeded(t *testing.T) {
	d, r, clk := newD(1000)
	rate := store.Rate{Interval: 100 * time.Millisecond, Burst: 3}
	d.SetFlow("p", store.Flow{Rate: rate})
	var tats []time.Time
	d.cfg.Start = func(it Item) { r.start(it); tats = append(tats, it.Flow.TAT) }
	d.Resume()
	t0 := clk.Now()
	seq := int64(0)
	for step := range 200 {
		for range step % 4 {
			seq++
			d.Add(Item{ID: fmt.Sprint(seq), Seq: seq, Process: "p", Flow: FlowOf("k", "")})
		}
		clk.Advance(37 * time.Millisecond)
		elapsed := clk.Now().Sub(t0)
		if n, most := len(r.ids()), 3+int(elapsed/rate.Interval); n > most {
			t.Fatalf("after %v: %d starts, at most %d allowed", elapsed, n, most)
		}
	}
	if len(r.ids()) < 70 {
		t.Fatalf("only %d starts in %v: the limit holds back more than it should", len(r.ids()), clk.Now().Sub(t0))
	}
	for i := 1; i < len(tats); i++ {
		if !tats[i].After(tats[i-1]) {
			t.Fatalf("state %d (%v) is not after %v", i, tats[i], tats[i-1])
		}
	}
	if got := d.RateState("k"); !got.Equal(tats[len(tats)-1]) {
		t.Fatalf("RateState = %v, want the last claim's %v", got, tats[len(tats)-1])
	}
}

// A loaded state (a restart) holds the key back as the claims before it
// did.
func TestRateStateLoaded(t *testing.T) {
	d, r, clk := newD(10)
	d.SetFlow("p", store.Flow{Rate: store.Rate{Interval: time.Second, Burst: 1}})
	d.LoadRates(map[string]time.Time{"k": clk.Now().Add(3 * time.Second)})
	d.Resume()
	d.Add(Item{ID: "x", Seq: 1, Process: "p", Flow: FlowOf("k", "")})
	clk.Advance(2999 * time.Millisecond)
	eq(t, "held", r.ids(), nil)
	clk.Advance(time.Millisecond)
	eq(t, "released", r.ids(), []string{"x"})
}

// A concurrency key at its limit parks its items aside: another key's
// item behind a long queue of the busy key starts at once.
func TestKeyConcurrencyFair(t *testing.T) {
	d, r, _ := newD(50)
	d.SetFlow("p", store.Flow{KeyConcurrency: 2})
	d.Resume()
	var items []Item
	for i := range 10_000 {
		items = append(items, Item{ID: fmt.Sprintf("a%d", i), Seq: int64(i + 1), Process: "p", Flow: FlowOf("", "a")})
	}
	items = append(items, Item{ID: "b", Seq: 20_000, Process: "p", Flow: FlowOf("", "b")})
	d.Add(items...)
	eq(t, "started", r.ids(), []string{"a0", "a1", "b"})
	if st := d.Stats(); st.KeyWait != 9_998 || st.Running != 3 {
		t.Fatalf("stats %+v", st)
	}
	d.Done(Item{ID: "a0", Process: "p", Flow: FlowOf("", "a")})
	eq(t, "next of a", r.ids(), []string{"a0", "a1", "b", "a2"})
	rate, conc := d.WaitingKeys(5)
	if len(rate) != 0 || len(conc) != 1 || conc[0].Key != "a" || conc[0].Waiting != 9_997 || conc[0].Running != 2 {
		t.Fatalf("waiting keys: rate %+v conc %+v", rate, conc)
	}
}

// A removed (cancelled) item waiting on a key is never started and stops
// counting as waiting.
func TestRemoveWhileWaitingOnAKey(t *testing.T) {
	d, r, clk := newD(10)
	d.SetFlow("p", store.Flow{KeyConcurrency: 1, Rate: store.Rate{Interval: time.Second, Burst: 1}})
	d.Resume()
	d.Add(Item{ID: "a", Seq: 1, Process: "p", Flow: FlowOf("", "c")}, Item{ID: "b", Seq: 2, Process: "p", Flow: FlowOf("", "c")},
		Item{ID: "x", Seq: 3, Process: "p", Flow: FlowOf("r", "")}, Item{ID: "y", Seq: 4, Process: "p", Flow: FlowOf("r", "")})
	eq(t, "first", r.ids(), []string{"a", "x"})
	if !d.Remove("b") || !d.Remove("y") {
		t.Fatal("remove")
	}
	if st := d.Stats(); st.KeyWait != 0 || st.RateWait != 0 || st.Ready != 0 {
		t.Fatalf("stats %+v", st)
	}
	d.Done(Item{ID: "a", Process: "p", Flow: FlowOf("", "c")})
	clk.Advance(5 * time.Second)
	eq(t, "nothing more", r.ids(), []string{"a", "x"})
	select {
	case <-d.Idle():
		t.Fatal("idle while x runs")
	default:
	}
}
