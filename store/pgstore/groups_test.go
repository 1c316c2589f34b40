package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// admitGroup admits one run of process p with group key k under policy g
// and payload raw, at now.
func admitGroup(t *testing.T, s *pgstore.Store, p, k string, g store.GroupPolicy, now time.Time, raw string) store.AdmitResult {
	t.Helper()
	res, err := s.Admit(context.Background(), store.Admission{Event: "ev", Payload: json.RawMessage(raw), Now: now,
		Runs: []store.NewRun{{ID: newID(p), Process: p, GroupKey: k, Group: g}}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// groupCount counts the runs of group key k in the given statuses, in one
// statement (one snapshot).
func groupCount(t *testing.T, s *pgstore.Store, k string, cond string) int {
	t.Helper()
	var n int
	err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+s.Schema()+".runs WHERE group_key = $1 AND "+cond, k).Scan(&n)
	if err != nil {
		t.Error(err)
	}
	return n
}

// TestSingletonWaitsForAnotherNode: two nodes admit the same singleton
// key at the same moment. The first holds its admission uncommitted; the
// second waits for the group's lock, then finds the first's run and
// admits nothing.
func TestSingletonWaitsForAnotherNode(t *testing.T) {
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	var ra, rb store.AdmitResult
	raceWhileHeld(t, a.Schema(), func() { ra = admitGroup(t, a, "p", "k", store.GroupSingleton, t0, `1`) },
		func() { rb = admitGroup(t, b, "p", "k", store.GroupSingleton, t0, `2`) })
	if len(ra.Admitted) != 1 || len(rb.Admitted) != 0 || len(rb.Grouped) != 1 || rb.Grouped[0].ID != ra.Admitted[0].ID {
		t.Fatalf("first %+v, second %+v: want the second grouped with the first's run", ra, rb)
	}
	if n := groupCount(t, a, "k", "true"); n != 1 {
		t.Errorf("%d runs of the singleton key, want 1", n)
	}
}

// TestDebounceWaitsForAnotherNode: the same for Debounce: the second
// admission waits, then takes over the first's run (its payload and
// start) rather than create a second never-started run.
func TestDebounceWaitsForAnotherNode(t *testing.T) {
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	var ra, rb store.AdmitResult
	raceWhileHeld(t, a.Schema(), func() { ra = admitGroup(t, a, "p", "k", store.GroupDebounce, t0, `1`) },
		func() { rb = admitGroup(t, b, "p", "k", store.GroupDebounce, t0, `2`) })
	if len(ra.Admitted) != 1 || len(rb.Grouped) != 1 || rb.Grouped[0].ID != ra.Admitted[0].ID {
		t.Fatalf("first %+v, second %+v: want the second debounced into the first's run", ra, rb)
	}
	if r, err := a.Run(context.Background(), ra.Admitted[0].ID); err != nil || string(r.Payload) != "2" {
		t.Errorf("the debounced run: %v, payload %s, want 2", err, r.Payload)
	}
	checkCounts(t, a)
}

// TestSingletonExactAcrossNodes: two nodes admit one singleton key
// concurrently, many times, while a worker claims and completes its runs:
// at no moment has the key two runs to run (idle, running or waiting), as
// a reader of the table sees it, and at the end no more than one. The
// admitters go on until the worker has completed two runs (within 20 s),
// so that a slow start of the worker on a loaded machine cannot pass for
// completions that let no new run in.
func TestSingletonExactAcrossNodes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	const perAdmitter = 60
	var wg, bg sync.WaitGroup
	var admitted, grouped, sent, completed atomic.Int64
	deadline := time.Now().Add(20 * time.Second)
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < perAdmitter || completed.Load() < 2 && time.Now().Before(deadline); n++ {
				sent.Add(1)
				res, err := s.Admit(ctx, store.Admission{Event: "ev", Now: time.Now(),
					Runs: []store.NewRun{{ID: newID("p"), Process: "p", GroupKey: "k", Group: store.GroupSingleton}}})
				if err != nil {
					t.Error(err)
					return
				}
				admitted.Add(int64(len(res.Admitted)))
				grouped.Add(int64(len(res.Grouped)))
			}
		}()
	}
	stop := make(chan struct{})
	var worst atomic.Int64
	bg.Add(2)
	go func() { // the worker: runs of the key end, so new ones are admitted
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			now := time.Now()
			res, err := b.ClaimNext(ctx, store.ClaimNextRequest{Owner: "w", Now: now, LeaseUntil: now.Add(time.Minute), Processes: map[string]int{"p": 0}, Limit: 4})
			if err != nil {
				t.Error(err)
				return
			}
			for _, r := range res.Runs {
				if _, err := b.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, Action: store.ActionComplete}); err != nil {
					t.Error(err)
					return
				}
				completed.Add(1)
			}
		}
	}()
	go func() { // the reader
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := int64(groupCount(t, a, "k", "status IN ('idle', 'running', 'waiting')")); n > worst.Load() {
				worst.Store(n)
			}
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	if w := worst.Load(); w > 1 {
		t.Errorf("the singleton key had %d runs to run at once", w)
	}
	if n := groupCount(t, a, "k", "status IN ('idle', 'running', 'waiting')"); n > 1 {
		t.Errorf("%d runs of the singleton key left to run", n)
	}
	if got := admitted.Load() + grouped.Load(); got != sent.Load() {
		t.Errorf("%d admissions answered, want %d", got, sent.Load())
	}
	if admitted.Load() < 2 {
		t.Errorf("only %d runs admitted: the worker's completions let no new run in", admitted.Load())
	}
	t.Logf("%d admitted, %d grouped", admitted.Load(), grouped.Load())
	checkCounts(t, a)
}

// TestDebounceExactAcrossNodes: two nodes debounce one key concurrently,
// many times: one run is created, never two never-started ones, and it
// holds the payload of the last admission that committed.
func TestDebounceExactAcrossNodes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 40 {
				res, err := s.Admit(ctx, store.Admission{Event: "ev", Payload: json.RawMessage(fmt.Sprint(i*100 + j)), Now: time.Now(),
					Runs: []store.NewRun{{ID: newID("p"), Process: "p", GroupKey: "k", Group: store.GroupDebounce}}})
				if err != nil {
					t.Error(err)
					return
				}
				admitted.Add(int64(len(res.Admitted)))
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n != 1 {
		t.Errorf("%d runs admitted for one debounced key, want 1", n)
	}
	if n := groupCount(t, a, "k", "true"); n != 1 {
		t.Errorf("%d runs of the debounced key, want 1", n)
	}
	checkCounts(t, a)
}

// TestGroupedFollowUps: follow-up runs are grouped as root runs are: a
// Singleton follow-up whose group has a run to run admits nothing (the
// update then falls back as for any follow-up admitting nothing), and a
// group key without a policy is stored with the run, on the batched path
// of attempt ends too.
func TestGroupedFollowUps(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	held := admitGroup(t, s, "c", "k", store.GroupSingleton, t0, `1`).Admitted[0]
	parents := admitFlow(t, s, "p", t0, 0, "", "", 2)
	r := claimOne(t, s, parents[0].ID, t0)
	res, err := s.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Now: t0, Action: store.ActionComplete, Then: "next", NoChildren: &store.Outcome{},
		Children: &store.Admission{Event: "next", ParentID: r.ID, CorrelationID: r.ID, Depth: 1, Now: t0,
			Runs: []store.NewRun{{ID: newID("c"), Process: "c", GroupKey: "k", Group: store.GroupSingleton}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Children.Admitted) != 0 || len(res.Children.Grouped) != 1 || res.Children.Grouped[0].ID != held.ID {
		t.Errorf("a singleton follow-up: %+v, want grouped with %s", res.Children, held.ID)
	}
	r = claimOne(t, s, parents[1].ID, t0)
	child := newID("c")
	res, err = s.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Now: t0, Action: store.ActionComplete, Then: "next", RequireChildren: true,
		Children: &store.Admission{Event: "next", ParentID: r.ID, CorrelationID: r.ID, Depth: 1, Now: t0,
			Runs: []store.NewRun{{ID: child, Process: "c", GroupKey: "k"}}}})
	if err != nil || len(res.Children.Admitted) != 1 || res.Children.Admitted[0].GroupKey != "k" {
		t.Fatalf("a follow-up with a key and no policy: %v %+v", err, res.Children)
	}
	if got, err := s.Run(ctx, child); err != nil || got.GroupKey != "k" {
		t.Errorf("the follow-up's group key: %v %q", err, got.GroupKey)
	}
	checkCounts(t, s)
}

// TestDebounceWakesNodes: a debounce that moves its run's start wakes the
// other nodes (their timers are set for the old start), as an admission
// does; one that leaves it as it was does not need to, and changes no
// count, through the store's writer or a caller's transaction (Tx).
func TestDebounceWakesNodes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	delayed := func(s store.Admitter, at time.Time) store.AdmitResult {
		t.Helper()
		res, err := s.Admit(ctx, store.Admission{Event: "ev", Now: t0, NotBefore: at,
			Runs: []store.NewRun{{ID: newID("p"), Process: "p", GroupKey: "k", Group: store.GroupDebounce}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	id := delayed(a, t0.Add(time.Hour)).Admitted[0].ID
	time.Sleep(100 * time.Millisecond) // b's listener reports its own connection first
	ready := watchFor(t, b, store.ChangeReady)
	res := delayed(a, time.Time{})
	if len(res.Grouped) != 1 || res.Grouped[0].ID != id || !res.Grouped[0].RetryAt.IsZero() {
		t.Fatalf("debounced to start at once: %+v", res)
	}
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("no notification of a debounced run's new start")
	}
	checkCounts(t, a)

	select { // a notification sent meanwhile (a reconnection) is not the one looked for
	case <-ready:
	default:
	}
	tx, err := a.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	res = delayed(a.Tx(tx), t0.Add(time.Minute))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("no notification of a debounced run's new start made in a caller's transaction")
	}
	if len(res.Grouped) != 1 || res.Grouped[0].ID != id || !res.Grouped[0].RetryAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("debounced in a caller's transaction: %+v", res)
	}
	if r, err := a.Run(ctx, id); err != nil || !r.RetryAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("the run after a debounce in a caller's transaction: %v %v", err, r.RetryAt)
	}
	checkCounts(t, a)
}

// TestPausedSchedulesShared: a pause made through one node is read by
// another, with its first time.
func TestPausedSchedulesShared(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	if err := a.PauseSchedule(ctx, "nightly", true, t0); err != nil {
		t.Fatal(err)
	}
	if err := b.PauseSchedule(ctx, "nightly", true, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := b.PausedSchedules(ctx)
	if err != nil || len(got) != 1 || !got["nightly"].Equal(t0) {
		t.Errorf("paused schedules through the other node: %v %v", got, err)
	}
	if err := b.PauseSchedule(ctx, "nightly", false, t0); err != nil {
		t.Fatal(err)
	}
	if got, err := a.PausedSchedules(ctx); err != nil || len(got) != 0 {
		t.Errorf("after a resume: %v %v", got, err)
	}
	a.Close()
	if err := a.PauseSchedule(ctx, "x", true, t0); !errors.Is(err, store.ErrClosed) {
		t.Errorf("pause on a closed store: %v", err)
	}
	if _, err := a.PausedSchedules(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("paused schedules of a closed store: %v", err)
	}
}
