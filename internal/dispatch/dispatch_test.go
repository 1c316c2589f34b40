package dispatch

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store"
)

type rec struct {
	mu      sync.Mutex
	started []string
}

func (r *rec) start(it Item) { r.mu.Lock(); r.started = append(r.started, it.ID); r.mu.Unlock() }
func (r *rec) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.started...)
}

func newD(slots int) (*Dispatcher, *rec, *clock.Fake) {
	r := &rec{}
	clk := clock.NewFake(time.Unix(1000, 0))
	d := New(Config{Slots: slots, Clock: clk, Start: r.start})
	return d, r, clk
}

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

func TestOrderAndSlots(t *testing.T) {
	tests := []struct {
		name   string
		slots  int
		limits map[string]int
		items  []Item
		want   []string // started before any Done
	}{
		{"creation order", 10, nil, []Item{{ID: "c", Seq: 3}, {ID: "a", Seq: 1}, {ID: "b", Seq: 2}}, []string{"a", "b", "c"}},
		{"slots bound", 2, nil, []Item{{ID: "a", Seq: 1}, {ID: "b", Seq: 2}, {ID: "c", Seq: 3}}, []string{"a", "b"}},
		{"process cap skips without blocking", 10, map[string]int{"p": 1},
			[]Item{{ID: "p1", Seq: 1, Process: "p"}, {ID: "p2", Seq: 2, Process: "p"}, {ID: "q1", Seq: 3, Process: "q"}},
			[]string{"p1", "q1"}},
		{"duplicates ignored", 10, nil, []Item{{ID: "a", Seq: 1}, {ID: "a", Seq: 1}}, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, r, _ := newD(tt.slots)
			for p, n := range tt.limits {
				d.SetLimit(p, n)
			}
			d.Add(tt.items...)
			eq(t, "paused", r.ids(), nil)
			d.Resume()
			eq(t, "started", r.ids(), tt.want)
		})
	}
}

func TestDoneFreesSlotAndUnparks(t *testing.T) {
	d, r, _ := newD(10)
	d.SetLimit("p", 1)
	d.Resume()
	d.Add(Item{ID: "p1", Seq: 1, Process: "p"}, Item{ID: "p2", Seq: 2, Process: "p"})
	eq(t, "first", r.ids(), []string{"p1"})
	d.Done(Item{ID: "p1", Process: "p"})
	eq(t, "after done", r.ids(), []string{"p1", "p2"})
	if st := d.Stats(); st.Running != 1 || st.Ready != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDelayedItemsWaitForTheirTime(t *testing.T) {
	d, r, clk := newD(10)
	d.Resume()
	now := clk.Now()
	d.Add(Item{ID: "late", Seq: 1, RetryAt: now.Add(2 * time.Second)}, Item{ID: "soon", Seq: 2, RetryAt: now.Add(time.Second)})
	if st := d.Stats(); st.Delayed != 2 {
		t.Fatalf("delayed %d", st.Delayed)
	}
	clk.Advance(999 * time.Millisecond)
	eq(t, "before", r.ids(), nil)
	clk.Advance(time.Millisecond)
	eq(t, "soon due", r.ids(), []string{"soon"})
	clk.Advance(time.Second)
	eq(t, "late due", r.ids(), []string{"soon", "late"})
}

// laggingClock reads the time 5 s behind its fake clock while lag is set,
// as a dispatcher does that read the time just before a test (or a fake
// clock's other user) advanced it; its timers keep the fake clock's times.
type laggingClock struct {
	*clock.Fake
	lag *atomic.Bool
}

func (c laggingClock) Now() time.Time {
	if c.lag.Load() {
		return c.Fake.Now().Add(-5 * time.Second)
	}
	return c.Fake.Now()
}

// TestDelayedItemStartsAtItsTime: the timer of a delayed item is armed at
// the item's time, not at a delay from a time read earlier: a clock
// advanced in between (a fake clock moved by another goroutine) must not
// make the item start late.
func TestDelayedItemStartsAtItsTime(t *testing.T) {
	r := &rec{}
	clk := clock.NewFake(time.Unix(1000, 0))
	lag := &atomic.Bool{}
	d := New(Config{Slots: 1, Clock: laggingClock{clk, lag}, Start: r.start})
	d.Resume()
	due := clk.Now().Add(10 * time.Second)
	lag.Store(true) // every time Add reads
	d.Add(Item{ID: "a", Seq: 1, RetryAt: due})
	lag.Store(false)
	clk.Set(due.Add(-time.Millisecond))
	eq(t, "before its time", r.ids(), nil)
	clk.Set(due)
	eq(t, "at its time", r.ids(), []string{"a"})
}

func TestRemoveAndWaiters(t *testing.T) {
	d, r, clk := newD(1)
	d.Resume()
	d.Add(Item{ID: "a", Seq: 1, Correlation: "c1"}, Item{ID: "b", Seq: 2, Correlation: "c2"}, Item{ID: "d", Seq: 3, Correlation: "c2", RetryAt: clk.Now().Add(time.Hour)})
	idle := d.Idle()
	c2 := d.CorrelationDone("c2")
	if !d.Remove("b") || !d.Remove("d") {
		t.Fatal("remove of waiting items failed")
	}
	if d.Remove("a") {
		t.Fatal("removed a started item")
	}
	select {
	case <-c2:
	default:
		t.Fatal("correlation c2 not done after its items were removed")
	}
	select {
	case <-idle:
		t.Fatal("idle while a runs")
	default:
	}
	quiet := d.Quiet()
	d.Done(Item{ID: "a", Correlation: "c1"})
	<-idle
	<-quiet
	eq(t, "started", r.ids(), []string{"a"})
	if d.Active() != 0 {
		t.Fatalf("active %d", d.Active())
	}
}

// A hold keeps Idle from firing, but it is not an item: Stats and Active
// do not count it.
func TestHoldIsNoItem(t *testing.T) {
	d, _, _ := newD(1)
	d.Hold()
	d.Add(Item{ID: "a", Seq: 1})
	idle := d.Idle()
	if got := d.Stats().Ready; got != 1 {
		t.Errorf("Stats().Ready = %d with one item and a hold, want 1", got)
	}
	if got := d.Active(); got != 1 {
		t.Errorf("Active() = %d with one item and a hold, want 1", got)
	}
	if !d.Remove("a") {
		t.Fatal("remove failed")
	}
	if s := d.Stats(); s.Ready != 0 || d.Active() != 0 {
		t.Errorf("a hold alone: Ready %d, Active %d, want 0 and 0", s.Ready, d.Active())
	}
	select {
	case <-idle:
		t.Fatal("idle while held")
	default:
	}
	d.Release()
	<-idle
}

func TestPauseStopsStarting(t *testing.T) {
	d, r, _ := newD(10)
	d.Resume()
	d.Pause()
	d.Add(Item{ID: "a", Seq: 1})
	eq(t, "paused", r.ids(), nil)
	d.Resume()
	eq(t, "resumed", r.ids(), []string{"a"})
}

// Free counts the slots no item holds or waits for (holds do not count),
// and Freed is called each time a started item is Done.
func TestFreeAndFreed(t *testing.T) {
	r := &rec{}
	freed := 0
	d := New(Config{Slots: 3, Clock: clock.NewFake(time.Unix(1000, 0)), Start: r.start, Freed: func() { freed++ }})
	steps := []struct {
		name string
		do   func()
		free int
	}{
		{"paused, empty", func() {}, 3},
		{"two waiting", func() { d.Add(Item{ID: "a", Seq: 1}, Item{ID: "b", Seq: 2}) }, 1},
		{"a hold counts nothing", d.Hold, 1},
		{"started", d.Resume, 1},
		{"two more than slots", func() { d.Add(Item{ID: "c", Seq: 3}, Item{ID: "d", Seq: 4}, Item{ID: "e", Seq: 5}) }, -2},
		{"one done starts the next", func() { d.Done(Item{ID: "a", Seq: 1}) }, -1},
	}
	for _, s := range steps {
		s.do()
		if got := d.Free(); got != s.free {
			t.Errorf("%s: Free() = %d, want %d", s.name, got, s.free)
		}
	}
	if freed != 1 {
		t.Errorf("Freed called %d times, want 1", freed)
	}
}

// A waiting run's deadline does not keep Idle from firing until it is
// due; then it is an item like any other. Replace swaps a run's item
// without its chain looking done in between.
func TestWaitingItems(t *testing.T) {
	d, r, clk := newD(10)
	d.Resume()
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	d.Add(Item{ID: "w", Seq: 1, Correlation: "c", RetryAt: clk.Now().Add(time.Hour), Waiting: true})
	if !closed(d.Idle()) {
		t.Fatal("not idle with only a waiting run's deadline")
	}
	c := d.CorrelationDone("c")
	if closed(c) {
		t.Fatal("the chain of a waiting run is done")
	}
	d.Replace(Item{ID: "w", Seq: 1, Correlation: "c"}) // signalled: due now
	if closed(c) {
		t.Fatal("the chain looked done while its run was swapped")
	}
	eq(t, "started after the swap", r.ids(), []string{"w"})
	d.Done(Item{ID: "w", Correlation: "c"})
	if !closed(c) || !closed(d.Idle()) {
		t.Fatal("not done after the run ended")
	}
	d.Add(Item{ID: "x", Seq: 2, RetryAt: clk.Now().Add(time.Minute), Waiting: true})
	clk.Advance(time.Minute)
	eq(t, "due at its deadline", r.ids(), []string{"w", "x"})
	idle := d.Idle()
	if closed(idle) {
		t.Fatal("idle while the due waiting run runs")
	}
	d.Done(Item{ID: "x"})
	if !closed(idle) || d.Active() != 0 {
		t.Fatalf("active %d after all ended", d.Active())
	}
}

// Vacate releases only the fleet slot of an item whose handler returned:
// the next item starts at once, unless it waits for what the vacated item
// still holds (its process's cap, its concurrency key); the vacated item
// counts as running, and its correlation as active, until Done.
func TestVacateReleasesOnlyTheFleetSlot(t *testing.T) {
	d, r, _ := newD(1)
	d.SetLimit("p", 1)
	d.Resume()
	p1 := Item{ID: "p1", Seq: 1, Process: "p", Correlation: "c1"}
	d.Add(p1, Item{ID: "p2", Seq: 2, Process: "p", Correlation: "c2"}, Item{ID: "q1", Seq: 3, Process: "q", Correlation: "c3"})
	eq(t, "first", r.ids(), []string{"p1"})
	idle, quiet, chain := d.Idle(), d.Quiet(), d.CorrelationDone("c1")

	d.Vacate(&p1)
	d.Vacate(&p1) // a second call changes nothing
	// p2 waits for p's cap, which p1 still holds.
	eq(t, "after vacate", r.ids(), []string{"p1", "q1"})
	if got := d.Running(); got != 2 {
		t.Errorf("Running = %d after Vacate, want 2 (p1 until Done, q1)", got)
	}
	for what, ch := range map[string]<-chan struct{}{"Idle": idle, "Quiet": quiet, "CorrelationDone(c1)": chain} {
		select {
		case <-ch:
			t.Errorf("%s fired while p1 was vacated and not Done", what)
		default:
		}
	}

	d.Done(Item{ID: "q1", Process: "q", Correlation: "c3"})
	eq(t, "after q1", r.ids(), []string{"p1", "q1"}) // p2 still waits for p1's place
	for what, ch := range map[string]<-chan struct{}{"Idle": idle, "Quiet": quiet, "Idle (asked now)": d.Idle(), "Quiet (asked now)": d.Quiet()} {
		select {
		case <-ch:
			t.Errorf("%s fired while p1 was vacated and not Done", what)
		default:
		}
	}
	d.Done(p1)
	<-chain
	eq(t, "after done", r.ids(), []string{"p1", "q1", "p2"})
	if got := d.Running(); got != 1 {
		t.Errorf("Running = %d, want 1 (p2)", got)
	}
	d.Done(Item{ID: "p2", Process: "p", Correlation: "c2"})
	<-idle
	<-quiet

	x := Item{ID: "x", Seq: 4, Process: "q"} // alone: nothing else waits or runs
	d.Add(x)
	d.Vacate(&x)
	select {
	case <-d.Idle():
		t.Error("Idle fired while x was vacated and not Done")
	default:
	}
	d.Done(x)
	<-d.Idle()
}

// A vacated item keeps its concurrency key's place until Done.
func TestVacateKeepsTheKey(t *testing.T) {
	d, r, _ := newD(2)
	d.SetFlow("p", store.Flow{KeyConcurrency: 1})
	d.Resume()
	a := Item{ID: "a", Seq: 1, Process: "p", Flow: FlowOf("", "k")}
	d.Add(a, Item{ID: "b", Seq: 2, Process: "p", Flow: FlowOf("", "k")})
	eq(t, "first", r.ids(), []string{"a"})
	d.Vacate(&a)
	eq(t, "after vacate", r.ids(), []string{"a"})
	d.Done(a)
	eq(t, "after done", r.ids(), []string{"a", "b"})
}
