package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// t0 is the time the flow control tests start at: explicit times, so that
// what they check does not depend on the machine's speed.
var t0 = time.Unix(1_800_000_000, 0)

// admitFlow admits, at now, one root run of process p per key pair, with
// the given priority.
func admitFlow(t *testing.T, s *pgstore.Store, p string, now time.Time, prio int, rateKey, concKey string, n int) []store.Run {
	t.Helper()
	runs := make([]store.NewRun, n)
	for i := range runs {
		runs[i] = store.NewRun{ID: newID(p), Process: p, Priority: prio, RateKey: rateKey, ConcurrencyKey: concKey}
	}
	res, err := s.Admit(context.Background(), store.Admission{Event: "ev", Runs: runs, Now: now})
	if err != nil || len(res.Admitted) != n {
		t.Fatalf("admit: %v, %d of %d admitted", err, len(res.Admitted), n)
	}
	return res.Admitted
}

// claimAt claims up to limit runs of p (capped at cap, with flow f) at now.
func claimAt(t *testing.T, s *pgstore.Store, owner string, now time.Time, p string, capN int, f store.Flow, limit int) store.ClaimNextResult {
	t.Helper()
	req := store.ClaimNextRequest{Owner: owner, Now: now, LeaseUntil: now.Add(time.Hour), Processes: map[string]int{p: capN}, Limit: limit}
	if f != (store.Flow{}) {
		req.Flows = map[string]store.Flow{p: f}
	}
	res, err := s.ClaimNext(context.Background(), req)
	if err != nil {
		t.Error(err)
	}
	if !res.NextAt.IsZero() && !res.NextAt.After(now) {
		t.Errorf("NextAt %v is not after the claim's now %v: the node would claim again at once", res.NextAt, now)
	}
	return res
}

// complete ends the attempt of a claimed run.
func complete(t *testing.T, s *pgstore.Store, r store.Run, now time.Time) {
	t.Helper()
	if _, err := s.Update(context.Background(), store.Update{RunID: r.ID, Epoch: r.Epoch, Action: store.ActionComplete, Now: now}); err != nil {
		t.Fatal(err)
	}
}

// runningByKey counts the running runs of p per concurrency key.
func runningByKey(t *testing.T, s *pgstore.Store, p string) map[string]int {
	t.Helper()
	runs, err := s.Runs(context.Background(), store.RunFilter{Process: p, Statuses: []store.Status{store.StatusRunning}, Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range runs {
		out[r.ConcurrencyKey]++
	}
	return out
}

// TestClaimNextPriorityOrder: on every claim path (uncapped, capped, with
// flow limits) a run of higher priority admitted after a backlog is
// claimed before it, and a run of priority p admitted more than
// p × PriorityStep after an older one is not.
func TestClaimNextPriorityOrder(t *testing.T) {
	for _, c := range []struct {
		name string
		cap  int
		flow store.Flow
	}{
		{"uncapped", 0, store.Flow{}},
		{"capped", 100, store.Flow{}},
		{"flow", 0, store.Flow{KeyConcurrency: 100}},
		{"capped flow", 100, store.Flow{Rate: store.Rate{Interval: time.Millisecond, Burst: 100}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openIn(t, t.TempDir(), pgstore.Options{})
			backlog := admitFlow(t, s, "p", t0, 0, "r", "k", 3)
			late := admitFlow(t, s, "p", t0.Add(3*store.PriorityStep), 1, "r", "k", 1)[0] // rank t0+2m: after the backlog
			urgent := admitFlow(t, s, "p", t0.Add(store.PriorityStep), 2, "r", "k", 1)[0] // rank t0-1m: before it
			want := []string{urgent.ID, backlog[0].ID, backlog[1].ID, backlog[2].ID, late.ID}
			var got []string
			for range want {
				res := claimAt(t, s, "o", t0.Add(time.Hour), "p", c.cap, c.flow, 1)
				if len(res.Runs) != 1 {
					t.Fatalf("claim %d: %d runs", len(got)+1, len(res.Runs))
				}
				r := res.Runs[0]
				if r.Priority == 0 && r.ID == urgent.ID || r.RateKey != "r" || r.ConcurrencyKey != "k" {
					t.Errorf("claimed run %+v: flow fields lost", r)
				}
				got = append(got, r.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("claim order %v, want %v", got, want)
			}
			// In one claim too: the runs come back in rank order.
			s2 := openIn(t, t.TempDir(), pgstore.Options{})
			b2 := admitFlow(t, s2, "p", t0, 0, "", "", 2)
			u2 := admitFlow(t, s2, "p", t0.Add(store.PriorityStep), 2, "", "", 1)[0]
			res := claimAt(t, s2, "o", t0.Add(time.Hour), "p", c.cap, c.flow, 10)
			if len(res.Runs) != 3 || res.Runs[0].ID != u2.ID || res.Runs[1].ID != b2[0].ID || res.Runs[2].ID != b2[1].ID {
				t.Errorf("one claim of three runs: %+v", res.Runs)
			}
		})
	}
}

// TestFlowRateExactAcrossNodes: two nodes claim runs of one rate key at
// the same moments (explicit times, 250 ms apart, for ten seconds): no
// span holds more starts than Burst plus the span over the interval, and
// the key starts exactly as many runs as the rate allows.
func TestFlowRateExactAcrossNodes(t *testing.T) {
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	rate := store.Rate{Interval: time.Second, Burst: 3}
	f := store.Flow{Rate: rate}
	admitFlow(t, a, "p", t0, 0, "k", "", 60)
	admitFlow(t, a, "p", t0, 0, "other", "", 5) // another key: claimed at once, whatever k's state
	step := 250 * time.Millisecond
	steps := 41 // t0 … t0+10s
	var mu sync.Mutex
	started := map[string]time.Time{}
	other := 0
	for i := range steps {
		now := t0.Add(time.Duration(i) * step)
		var wg sync.WaitGroup
		for _, s := range []*pgstore.Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := claimAt(t, s, s.Schema()+fmt.Sprint(s == a), now, "p", 0, f, 5)
				mu.Lock()
				defer mu.Unlock()
				for _, r := range res.Runs {
					if r.RateKey == "k" {
						started[r.ID] = now
					} else {
						other++
					}
				}
			}()
		}
		wg.Wait()
	}
	if other != 5 {
		t.Errorf("%d runs of another key claimed, want 5", other)
	}
	for i := range steps {
		for j := i; j < steps; j++ {
			from, to := t0.Add(time.Duration(i)*step), t0.Add(time.Duration(j)*step)
			n := 0
			for _, at := range started {
				if !at.Before(from) && !at.After(to) {
					n++
				}
			}
			if bound := rate.Burst + int(to.Sub(from)/rate.Interval); n > bound {
				t.Fatalf("%d starts between %v and %v, more than %d", n, from.Sub(t0), to.Sub(t0), bound)
			}
		}
	}
	if len(started) != 13 { // 3 at once, then one a second for 10 s
		t.Errorf("%d starts of the key in 10 s, want 13", len(started))
	}
	// The key's state: its 13th start moved it to t0 + 13 s.
	for _, s := range []*pgstore.Store{a, b} {
		st, err := s.RateStates(context.Background(), t0.Add(10*time.Second))
		if err != nil || len(st) != 1 || !st["k"].Equal(t0.Add(13*time.Second)) {
			t.Errorf("rate states: %v %v, want k at +13s", err, st)
		}
	}
	if st, err := a.RateStates(context.Background(), t0.Add(13*time.Second)); err != nil || len(st) != 0 {
		t.Errorf("rate states once the time passed: %v %v, want none", err, st)
	}
}

// TestFlowRateExactWhileHeld: a node whose claim of a rate key is not
// committed yet holds the key: another node claiming the key at the same
// moment waits for it and then counts its starts (Burst in all, not
// Burst on each node).
func TestFlowRateExactWhileHeld(t *testing.T) {
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	admitFlow(t, a, "p", t0, 0, "k", "", 50) // more than the first claim locks
	f := store.Flow{Rate: store.Rate{Interval: time.Minute, Burst: 3}}
	var na, nb int
	raceWhileHeld(t, a.Schema(),
		func() { na = len(claimAt(t, a, "node-a", t0, "p", 0, f, 10).Runs) },
		func() { nb = len(claimAt(t, b, "node-b", t0, "p", 0, f, 10).Runs) })
	if na+nb != 3 {
		t.Errorf("%d + %d runs of a key with Burst 3 started at one moment on two nodes", na, nb)
	}
}

// TestFlowKeyConcurrencyExactAcrossNodes: two nodes claim runs of three
// concurrency keys (at most 2 running each) at the same moments while
// runs complete: no key ever has more than 2 running runs, across nodes,
// and every key fills up to 2 while it has runs waiting.
func TestFlowKeyConcurrencyExactAcrossNodes(t *testing.T) {
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	f := store.Flow{KeyConcurrency: 2}
	for _, k := range []string{"x", "y", "z"} {
		admitFlow(t, a, "p", t0, 0, "", k, 12)
	}
	admitFlow(t, a, "p", t0, 0, "", "", 3) // no key: never held back
	var mu sync.Mutex
	var held []store.Run
	for i := range 10 {
		now := t0.Add(time.Duration(i) * time.Second)
		var wg sync.WaitGroup
		for _, s := range []*pgstore.Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := claimAt(t, s, fmt.Sprint("node-", s == a), now, "p", 0, f, 4)
				mu.Lock()
				held = append(held, res.Runs...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		byKey := runningByKey(t, a, "p")
		for _, k := range []string{"x", "y", "z"} {
			if byKey[k] != 2 {
				t.Fatalf("step %d: key %s has %d running runs, want 2 (%v)", i, k, byKey[k], byKey)
			}
		}
		// One run of each key completes (whichever node holds it).
		done := map[string]bool{}
		for j := 0; j < len(held); j++ {
			if r := held[j]; r.ConcurrencyKey != "" && !done[r.ConcurrencyKey] {
				complete(t, a, r, now)
				done[r.ConcurrencyKey] = true
				held = append(held[:j], held[j+1:]...)
				j--
			}
		}
	}
	if n := countStatus(t, a, "p", store.StatusCompleted); n != 30 {
		t.Errorf("%d runs completed, want 30", n)
	}
}

// TestFlowKeyConcurrencyExactWhileHeld: the same with a claim held before
// its commit: the other node waits for the key and counts its runs.
func TestFlowKeyConcurrencyExactWhileHeld(t *testing.T) {
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	admitFlow(t, a, "p", t0, 0, "", "k", 50) // more than the first claim locks
	f := store.Flow{KeyConcurrency: 2}
	raceWhileHeld(t, a.Schema(),
		func() { claimAt(t, a, "node-a", t0, "p", 0, f, 10) },
		func() { claimAt(t, b, "node-b", t0, "p", 0, f, 10) })
	if n := runningByKey(t, a, "p")["k"]; n != 2 {
		t.Errorf("%d runs of a key capped at 2 running across two nodes", n)
	}
}

// TestFlowBusyKeyDoesNotBlock: a key at its limit with a large backlog in
// front does not stop a later run of another key from being claimed, for
// a concurrency key full before the claim, one that fills during it, and
// a rate key that allows no start.
func TestFlowBusyKeyDoesNotBlock(t *testing.T) {
	for _, c := range []struct {
		name      string
		flow      store.Flow
		rate, key string // the busy key
		limit     int
		want      int // runs claimed
	}{
		{"concurrency key full", store.Flow{KeyConcurrency: 1}, "", "a", 1, 1},
		{"concurrency key fills", store.Flow{KeyConcurrency: 2}, "", "a", 3, 2},
		{"rate key spent", store.Flow{Rate: store.Rate{Interval: time.Hour, Burst: 1}}, "a", "", 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openIn(t, t.TempDir(), pgstore.Options{})
			first := admitFlow(t, s, "p", t0, 0, c.rate, c.key, 1)
			if res := claimAt(t, s, "o", t0, "p", 0, c.flow, 1); len(res.Runs) != 1 || res.Runs[0].ID != first[0].ID {
				t.Fatalf("first claim: %+v", res)
			}
			admitFlow(t, s, "p", t0.Add(time.Second), 0, c.rate, c.key, 300)
			bRate, bKey := "", "b"
			if c.rate != "" {
				bRate, bKey = "b", ""
			}
			other := admitFlow(t, s, "p", t0.Add(2*time.Second), 0, bRate, bKey, 1)[0]
			res := claimAt(t, s, "o", t0.Add(time.Minute), "p", 0, c.flow, c.limit)
			if len(res.Runs) != c.want || res.Runs[len(res.Runs)-1].ID != other.ID {
				t.Fatalf("claimed %d runs (want %d, the last of key b): %+v", len(res.Runs), c.want, res.Runs)
			}
			if !res.More {
				t.Error("More is false with the busy key's runs left")
			}
		})
	}
}

// TestFlowNextAt: a claim held back by a rate key reports when the key
// allows the next start (and a node woken then claims it); a key that
// holds back no waiting run, and a concurrency key, report no time.
func TestFlowNextAt(t *testing.T) {
	s := openIn(t, t.TempDir(), pgstore.Options{})
	f := store.Flow{Rate: store.Rate{Interval: time.Minute, Burst: 1}, KeyConcurrency: 1}
	admitFlow(t, s, "p", t0, 0, "k", "", 2)
	res := claimAt(t, s, "o", t0, "p", 0, f, 5)
	if len(res.Runs) != 1 || !res.More || !res.NextAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("first claim: %d runs, more %v, next %v; want 1, true, %v", len(res.Runs), res.More, res.NextAt, t0.Add(time.Minute))
	}
	res = claimAt(t, s, "o", t0.Add(30*time.Second), "p", 0, f, 5)
	if len(res.Runs) != 0 || !res.NextAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("claim before the key allows a start: %d runs, next %v", len(res.Runs), res.NextAt)
	}
	res = claimAt(t, s, "o", t0.Add(time.Minute), "p", 0, f, 5)
	if len(res.Runs) != 1 || res.More || !res.NextAt.IsZero() {
		t.Fatalf("claim when the key allows it: %d runs, more %v, next %v; want 1, false, zero", len(res.Runs), res.More, res.NextAt)
	}
	// The key is spent until t0+2m, but no run waits for it.
	admitFlow(t, s, "p", t0, 0, "", "c", 2)
	res = claimAt(t, s, "o", t0.Add(time.Minute), "p", 0, f, 5)
	if len(res.Runs) != 1 || !res.More || !res.NextAt.IsZero() {
		t.Fatalf("claim with a spent key no run waits for and a full concurrency key: %d runs, more %v, next %v; want 1, true, zero",
			len(res.Runs), res.More, res.NextAt)
	}
}

// TestFlowFieldsKept: a run's priority and keys are kept from admission
// (Admit, a follow-up of an attempt end, Tx) and read back by Run, Runs,
// Chain, Pending and the results of Update.
func TestFlowFieldsKept(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	root := admitFlow(t, s, "p", t0, 7, "r", "c", 1)[0]
	if root.Priority != 7 || root.RateKey != "r" || root.ConcurrencyKey != "c" {
		t.Fatalf("admitted %+v", root)
	}
	res := claimAt(t, s, "o", t0, "p", 0, store.Flow{}, 1)
	if len(res.Runs) != 1 || !res.Runs[0].CreatedAt.Equal(t0) {
		t.Fatalf("claim: %+v", res)
	}
	child := newID("child")
	u, err := s.Update(ctx, store.Update{RunID: root.ID, Epoch: res.Runs[0].Epoch, Action: store.ActionComplete, Now: t0, Then: "next",
		Children: &store.Admission{Event: "next", ParentID: root.ID, CorrelationID: root.ID, Depth: 1, Now: t0,
			Runs: []store.NewRun{{ID: child, Process: "q", Priority: -3, RateKey: "r2", ConcurrencyKey: "c2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if u.Run.Priority != 7 || u.Run.RateKey != "r" || u.Run.ConcurrencyKey != "c" {
		t.Errorf("update result %+v", u.Run)
	}
	if c := u.Children.Admitted; len(c) != 1 || c[0].Priority != -3 || c[0].RateKey != "r2" || c[0].ConcurrencyKey != "c2" {
		t.Errorf("follow-up admitted %+v", c)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	txID := newID("tx")
	if _, err := s.Tx(tx).Admit(ctx, store.Admission{Event: "ev", Now: t0, Runs: []store.NewRun{{ID: txID, Process: "p", Priority: 1, RateKey: "r3"}}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string][3]any{root.ID: {7, "r", "c"}, child: {-3, "r2", "c2"}, txID: {1, "r3", ""}}
	check := func(how string, r store.Run) {
		if w, ok := want[r.ID]; ok && [3]any{r.Priority, r.RateKey, r.ConcurrencyKey} != w {
			t.Errorf("%s %s: %d %q %q, want %v", how, r.ID, r.Priority, r.RateKey, r.ConcurrencyKey, w)
		}
	}
	for id := range want {
		r, err := s.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		check("Run", r)
	}
	runs, err := s.Runs(ctx, store.RunFilter{Limit: 10})
	if err != nil || len(runs) != 3 {
		t.Fatalf("runs: %v %d", err, len(runs))
	}
	for _, r := range runs {
		check("Runs", r)
	}
	chain, err := s.Chain(ctx, root.ID)
	if err != nil || len(chain) != 2 {
		t.Fatalf("chain: %v %d", err, len(chain))
	}
	for _, r := range chain {
		check("Chain", r)
	}
	pend, err := s.Pending(ctx, 0, 10)
	if err != nil || len(pend) != 2 {
		t.Fatalf("pending: %v %d", err, len(pend))
	}
	for _, p := range pend {
		check("Pending", store.Run{ID: p.ID, Priority: p.Priority, RateKey: p.RateKey, ConcurrencyKey: p.ConcurrencyKey})
		if !p.CreatedAt.Equal(t0) {
			t.Errorf("pending %s created at %v", p.ID, p.CreatedAt)
		}
	}
}

// TestClaimKeepsRateTAT: Claim keeps each run's new theoretical arrival
// time (a run without a rate key keeps none), and RateStates reads the
// largest of each key that is after now.
func TestClaimKeepsRateTAT(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	runs := append(admitFlow(t, s, "p", t0, 0, "k", "", 2), admitFlow(t, s, "p", t0, 0, "", "", 1)...)
	ids := []string{runs[0].ID, runs[1].ID, runs[2].ID}
	tats := []time.Time{t0.Add(2 * time.Second), t0.Add(time.Second), t0.Add(5 * time.Second)}
	if got, err := s.Claim(ctx, store.ClaimRequest{IDs: ids, Owner: "o", Now: t0, LeaseUntil: t0.Add(time.Hour), RateTATs: tats}); err != nil || len(got) != 3 {
		t.Fatalf("claim: %v, %d runs", err, len(got))
	}
	st, err := s.RateStates(ctx, t0)
	if err != nil || len(st) != 1 || !st["k"].Equal(t0.Add(2*time.Second)) {
		t.Errorf("rate states: %v %v, want k at +2s only", err, st)
	}
	if st, err := s.RateStates(ctx, t0.Add(2*time.Second)); err != nil || len(st) != 0 {
		t.Errorf("rate states at +2s: %v %v, want none", err, st)
	}
}

// TestWakeOnKeyedFinish: a run with a concurrency key that stops running
// wakes the nodes as an admission does (a run of its key they held back
// may start now): the store's watchers are told when it commits, and the
// other nodes by the same notification. The end of a run without a key
// wakes nobody.
func TestWakeOnKeyedFinish(t *testing.T) {
	s := openIn(t, t.TempDir(), pgstore.Options{})
	admitFlow(t, s, "p", t0, 0, "", "k", 1)
	admitFlow(t, s, "p", t0, 0, "", "", 1)
	res := claimAt(t, s, "o", t0, "p", 0, store.Flow{KeyConcurrency: 1}, 2)
	if len(res.Runs) != 2 {
		t.Fatalf("claimed %d runs, want 2", len(res.Runs))
	}
	var mu sync.Mutex
	woken := 0
	stop := s.Watch(func(c store.Change) {
		if c&store.ChangeReady != 0 {
			mu.Lock()
			woken++
			mu.Unlock()
		}
	})
	defer stop()
	for _, r := range res.Runs {
		mu.Lock()
		woken = 0
		mu.Unlock()
		complete(t, s, r, t0)
		mu.Lock()
		// The listener may report a reconnection at any time: only the
		// keyless end is checked for silence when nothing else fired.
		if r.ConcurrencyKey != "" && woken == 0 {
			t.Errorf("the end of a run of key %q woke no one", r.ConcurrencyKey)
		}
		mu.Unlock()
	}
}

// downgradeFlow brings s's schema back to version 3, as that version
// wrote it: no flow control columns, runs_idle by seq.
func downgradeFlow(t *testing.T, s *pgstore.Store) {
	t.Helper()
	downgradeWaits(t, s)
	sch := s.Schema()
	execAll(t, s,
		"DROP INDEX "+sch+".runs_idle, "+sch+".runs_conc, "+sch+".runs_rate_tat, "+sch+".runs_rate_idle",
		"ALTER TABLE "+sch+".runs DROP COLUMN priority, DROP COLUMN rate_key, DROP COLUMN conc_key, DROP COLUMN rate_tat",
		"CREATE INDEX runs_idle ON "+sch+".runs (seq) WHERE status = 'idle'",
		"UPDATE "+sch+".schema_version SET version = 3",
	)
}

// TestFlowControlMigrated: a schema of version 3 (no flow control) is
// brought to version 4 (and on to the current one): its runs read back with no priority and no keys,
// its idle runs are claimed in admission order, and runs admitted after
// the migration are ranked with them.
func TestFlowControlMigrated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openIn(t, dir, pgstore.Options{})
	old := admitFlow(t, s, "p", t0, 0, "", "", 3)
	res := claimAt(t, s, "o", t0, "p", 0, store.Flow{}, 1)
	if len(res.Runs) != 1 {
		t.Fatal("no claim")
	}
	downgradeFlow(t, s)
	sch := s.Schema()
	s.Close()

	s = openIn(t, dir, pgstore.Options{Schema: sch})
	var v int
	if err := s.Pool().QueryRow(ctx, "SELECT version FROM "+sch+".schema_version").Scan(&v); err != nil || v != pgstore.SchemaVersion() || v < 4 {
		t.Fatalf("schema version %d, %v; want %d", v, err, pgstore.SchemaVersion())
	}
	for _, r := range old {
		got, err := s.Run(ctx, r.ID)
		if err != nil || got.Priority != 0 || got.RateKey != "" || got.ConcurrencyKey != "" {
			t.Fatalf("run %s after the migration: %v %+v", r.ID, err, got)
		}
	}
	urgent := admitFlow(t, s, "p", t0.Add(time.Minute), 2, "k", "c", 1)[0]
	var got []string
	for range 3 {
		res := claimAt(t, s, "o", t0.Add(time.Hour), "p", 0, store.Flow{KeyConcurrency: 5}, 1)
		if len(res.Runs) != 1 {
			t.Fatalf("claim after the migration: %d runs", len(res.Runs))
		}
		got = append(got, res.Runs[0].ID)
	}
	if want := []string{urgent.ID, old[1].ID, old[2].ID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("claims after the migration %v, want %v", got, want)
	}
}

// TestFlowRoundsClaimEachRunOnce: a claim that reads past a full key in a
// second round does not pick again a run it picked in the first (its own
// row locks do not hide it), so it fills its limit with the runs behind.
func TestFlowRoundsClaimEachRunOnce(t *testing.T) {
	s := openIn(t, t.TempDir(), pgstore.Options{})
	x := admitFlow(t, s, "p", t0, 0, "", "", 1)[0]
	a := admitFlow(t, s, "p", t0.Add(time.Second), 0, "", "a", 10)
	y := admitFlow(t, s, "p", t0.Add(2*time.Second), 0, "", "", 1)[0]
	res := claimAt(t, s, "o", t0.Add(time.Minute), "p", 0, store.Flow{KeyConcurrency: 1}, 3)
	var got []string
	for _, r := range res.Runs {
		got = append(got, r.ID)
	}
	if want := []string{x.ID, a[0].ID, y.ID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("claimed %v, want %v", got, want)
	}
}

// TestPruneKeepsRateState: retention does not delete a completed run
// whose rate_tat is after its cut, so the key's state survives it (a rate
// of one start an hour with a shorter retention would otherwise allow a
// start too early); once the state is before the cut, the run goes.
func TestPruneKeepsRateState(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	f := store.Flow{Rate: store.Rate{Interval: time.Hour, Burst: 1}}
	admitFlow(t, s, "p", t0, 0, "k", "", 1)
	res := claimAt(t, s, "o", t0, "p", 0, f, 1)
	if len(res.Runs) != 1 {
		t.Fatal("no claim")
	}
	complete(t, s, res.Runs[0], t0)
	cut := t0.Add(30 * time.Minute)
	if n, err := s.Prune(ctx, store.PruneRequest{CompletedBefore: cut, Limit: 100}); err != nil || n != 0 {
		t.Fatalf("prune before the state passed: %d, %v; want 0", n, err)
	}
	if st, err := s.RateStates(ctx, cut); err != nil || !st["k"].Equal(t0.Add(time.Hour)) {
		t.Fatalf("rate states after the prune: %v %v", st, err)
	}
	admitFlow(t, s, "p", cut, 0, "k", "", 1)
	if res := claimAt(t, s, "o", cut, "p", 0, f, 1); len(res.Runs) != 0 {
		t.Fatal("a start allowed 30 minutes after the last on a rate of one an hour")
	}
	if n, err := s.Prune(ctx, store.PruneRequest{CompletedBefore: t0.Add(2 * time.Hour), Limit: 100}); err != nil || n != 1 {
		t.Fatalf("prune after the state passed: %d, %v; want 1", n, err)
	}
}
