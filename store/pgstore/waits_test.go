package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// waitAt ends the attempt of claimed run r at now at a wait recorded
// under key for signal sig ("" for a sleep), until deadline (zero: none).
func waitAt(t *testing.T, s *pgstore.Store, r store.Run, key, sig string, now, deadline time.Time) store.Run {
	t.Helper()
	res, err := s.Update(context.Background(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, Action: store.ActionWait,
		RetryAt: deadline, Wait: &store.Wait{Key: key, Signal: sig}})
	if err != nil {
		t.Fatalf("wait of %s: %v", r.ID, err)
	}
	return res.Run
}

// claimOne claims run id through s at now.
func claimOne(t *testing.T, s *pgstore.Store, id string, now time.Time) store.Run {
	t.Helper()
	rs, err := s.Claim(context.Background(), store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil || len(rs) != 1 {
		t.Fatalf("claim of %s: %v, %d runs", id, err, len(rs))
	}
	return rs[0]
}

// effectOf returns run id's effect record key (Status "" if none).
func effectOf(t *testing.T, s *pgstore.Store, id, key string) store.Effect {
	t.Helper()
	effs, err := s.Effects(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range effs {
		if e.Key == key {
			return e
		}
	}
	return store.Effect{}
}

// checkCounts compares the status counts (Counts, summed over every
// node's shards) with the runs (CountRuns).
func checkCounts(t *testing.T, s *pgstore.Store) {
	t.Helper()
	cs, err := s.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range store.Statuses {
		n, err := s.CountRuns(context.Background(), store.RunFilter{Statuses: []store.Status{st}})
		if err != nil {
			t.Fatal(err)
		}
		if cs[st] != n {
			t.Errorf("Counts says %d %s runs, CountRuns %d", cs[st], st, n)
		}
	}
}

// TestWaitsAcrossNodes: two nodes on one schema. A run one node put
// waiting with a deadline is not claimable through the other before it,
// the other's claims report the deadline as their NextAt, and at the
// deadline it claims the run. A run one node put waiting for a signal is
// woken by a signal sent through the other, which wakes the first node's
// watchers, and is then claimable.
func TestWaitsAcrossNodes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	req := func(now time.Time) store.ClaimNextRequest {
		return store.ClaimNextRequest{Owner: "node-b", Now: now, LeaseUntil: now.Add(time.Minute), Processes: map[string]int{"p": 0}, Limit: 10}
	}

	sleeper := admitFlow(t, a, "p", t0, 0, "", "", 1)[0]
	deadline := t0.Add(time.Hour)
	w := waitAt(t, a, claimOne(t, a, sleeper.ID, t0), "nap", "", t0, deadline)
	if w.Status != store.StatusWaiting || w.Attempts != 0 || !w.RetryAt.Equal(deadline) {
		t.Fatalf("after the wait: %s, %d attempts, deadline %v", w.Status, w.Attempts, w.RetryAt)
	}
	for _, now := range []time.Time{t0, deadline.Add(-time.Nanosecond)} {
		res, err := b.ClaimNext(ctx, req(now))
		if err != nil || len(res.Runs) != 0 || res.More || !res.NextAt.Equal(deadline) {
			t.Fatalf("claim at %v, before the deadline: %v, %d runs, more %v, next %v; want none, false, %v",
				now, err, len(res.Runs), res.More, res.NextAt, deadline)
		}
	}
	res, err := b.ClaimNext(ctx, req(deadline))
	if err != nil || len(res.Runs) != 1 || res.Runs[0].ID != sleeper.ID || res.More || !res.NextAt.IsZero() {
		t.Fatalf("claim at the deadline: %v, %+v; want the sleeper", err, res)
	}
	if r := res.Runs[0]; r.Attempts != 1 || r.Epoch != w.Epoch+1 {
		t.Errorf("claimed after its wait: attempt %d, epoch %d; want 1, %d", r.Attempts, r.Epoch, w.Epoch+1)
	}
	got, err := a.Run(ctx, sleeper.ID)
	if err != nil || got.Status != store.StatusRunning || got.LeaseOwner != "node-b" || !got.RetryAt.IsZero() {
		t.Fatalf("the sleeper, read through the first node: %v, %+v", err, got)
	}
	if e := effectOf(t, a, sleeper.ID, "nap"); e.Status != store.EffectWaiting {
		t.Errorf("the sleep's record after the deadline: %q, want waiting (no signal ended it)", e.Status)
	}
	// The wait refunded the attempt it ended, not the claim's record of
	// it.
	tl, err := a.Timeline(ctx, sleeper.ID)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, e := range tl {
		steps = append(steps, fmt.Sprintf("%s/%s/%d", e.Note, e.Status, e.Attempt))
	}
	if want := "[admitted/idle/0 claimed/running/1 waiting/waiting/0 claimed/running/1]"; fmt.Sprint(steps) != want {
		t.Errorf("timeline %v, want %s", steps, want)
	}
	checkCounts(t, a)

	time.Sleep(100 * time.Millisecond) // a's listener reports its own connection first
	woken := watchFor(t, a, store.ChangeReady)
	waiter := admitFlow(t, a, "p", t0, 0, "", "", 1)[0]
	waitAt(t, a, claimOne(t, a, waiter.ID, t0), "approval", "order-7", t0, time.Time{})
	if res, err := b.ClaimNext(ctx, req(deadline.Add(1000*time.Hour))); err != nil || len(res.Runs) != 0 || res.More || !res.NextAt.IsZero() {
		t.Fatalf("claim of a run waiting for a signal: %v, %+v; want nothing", err, res)
	}
	select {
	case <-woken: // the admission's, or the wait's
	default:
	}
	sres, err := b.Signal(ctx, store.SignalRequest{Key: "order-7", Payload: json.RawMessage(`{"ok":1}`), Now: t0.Add(time.Minute),
		KeepUntil: t0.Add(time.Hour)})
	if err != nil || sres.Kept || sres.Woken == nil || sres.Woken.ID != waiter.ID || sres.Woken.Status != store.StatusIdle {
		t.Fatalf("signal through the other node: %v, %+v", err, sres)
	}
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Error("the first node was not told that the signalled run is ready")
	}
	e := effectOf(t, a, waiter.ID, "approval")
	if e.Status != store.EffectCompleted || string(e.Output) != `{"ok":1}` {
		t.Errorf("the wait's record after the signal: %s %s", e.Status, e.Output)
	}
	res, err = a.ClaimNext(ctx, req(t0.Add(time.Minute)))
	if err != nil || len(res.Runs) != 1 || res.Runs[0].ID != waiter.ID {
		t.Fatalf("claim of the signalled run: %v, %+v", err, res)
	}
	checkCounts(t, b)
}

// TestSignalAndWaitRaceAcrossNodes: a wait and a signal for its key
// committing at the same moment through two nodes: one of them holds its
// commit while the other runs. Whichever commits first, the signal ends
// the wait; it is never kept while the run goes on waiting.
func TestSignalAndWaitRaceAcrossNodes(t *testing.T) {
	for _, waitFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("wait-first=%v", waitFirst), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			a := openIn(t, dir, pgstore.Options{})
			b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
			r := claimOne(t, a, admitFlow(t, a, "p", t0, 0, "", "", 1)[0].ID, t0)
			wait := func() {
				if _, err := a.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Now: t0, Action: store.ActionWait,
					Wait: &store.Wait{Key: "w", Signal: "k"}}); err != nil {
					t.Error(err)
				}
			}
			signal := func() {
				if _, err := b.Signal(ctx, store.SignalRequest{Key: "k", Payload: json.RawMessage(`1`), Now: t0, KeepUntil: t0.Add(time.Hour)}); err != nil {
					t.Error(err)
				}
			}
			if waitFirst {
				raceWhileHeld(t, a.Schema(), wait, signal)
			} else {
				raceWhileHeld(t, a.Schema(), signal, wait)
			}
			got, err := a.Run(ctx, r.ID)
			if err != nil || got.Status != store.StatusIdle || effectOf(t, a, r.ID, "w").Status != store.EffectCompleted {
				t.Fatalf("run %s (%v) with its wait's record %s: the signal missed the wait", got.Status, err, effectOf(t, a, r.ID, "w").Status)
			}
			// The signal was delivered, not kept as well.
			r2 := claimOne(t, b, admitFlow(t, b, "p", t0, 0, "", "", 1)[0].ID, t0)
			if w := waitAt(t, b, r2, "w", "k", t0, time.Time{}); w.Status != store.StatusWaiting {
				t.Errorf("a later wait found a signal: %s", w.Status)
			}
			checkCounts(t, a)
		})
	}
}

// TestClaimNextWaitsPastDeadline: on every claim path (uncapped, capped,
// with flow limits) waiting runs whose deadline has passed are claimed
// with the idle runs in rank order, and at most the claim's limit of them
// are made idle at a time, earliest deadline first.
func TestClaimNextWaitsPastDeadline(t *testing.T) {
	for _, c := range []struct {
		name string
		cap  int
		flow store.Flow
	}{{"plain", 0, store.Flow{}}, {"capped", 10, store.Flow{}}, {"flow", 0, store.Flow{KeyConcurrency: 10}}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := openIn(t, t.TempDir(), pgstore.Options{})
			// Three sleepers admitted first, due from t0+1h on; an idle
			// run admitted after them.
			var sleepers []string
			for i, r := range admitFlow(t, s, "p", t0, 0, "", "k", 3) {
				waitAt(t, s, claimOne(t, s, r.ID, t0), "nap", "", t0, t0.Add(time.Hour+time.Duration(i)*time.Second))
				sleepers = append(sleepers, r.ID)
			}
			idle := admitFlow(t, s, "p", t0.Add(time.Minute), 0, "", "k", 1)[0]
			now := t0.Add(2 * time.Hour)
			var got []string
			for i := range 4 {
				res := claimAt(t, s, "o", now, "p", c.cap, c.flow, 1)
				if len(res.Runs) != 1 {
					t.Fatalf("claim %d: %d runs", i, len(res.Runs))
				}
				got = append(got, res.Runs[0].ID)
				// Claimed with the limit of one, each claim made one
				// sleeper idle: the others still wait.
				if n := countStatus(t, s, "p", store.StatusWaiting); i < 2 && n != int64(2-i) {
					t.Errorf("after claim %d: %d runs waiting, want %d", i, n, 2-i)
				}
			}
			if want := append(sleepers, idle.ID); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("claimed %v, want %v (rank order)", got, want)
			}
			if res := claimAt(t, s, "o", now, "p", c.cap, c.flow, 1); len(res.Runs) != 0 || res.More {
				t.Errorf("claim of an empty queue: %+v", res)
			}
			checkCounts(t, s)
			if cs, err := s.Counts(ctx); err != nil || cs[store.StatusRunning] != 4 || cs[store.StatusWaiting] != 0 {
				t.Errorf("counts %v, %v", cs, err)
			}
		})
	}
}

// downgradeWaits brings s's schema back to version 4, as that version
// wrote it: no waiting status, wait key or kept signals, no group key or
// paused schedules; and, as every version before 6, an index of completed
// runs.
func downgradeWaits(t *testing.T, s *pgstore.Store) {
	t.Helper()
	downgradeLinks(t, s)
	sch := s.Schema()
	execAll(t, s,
		// Version 6 dropped the index of completed runs.
		"CREATE INDEX runs_completed ON "+sch+".runs (completed_at) WHERE status = 'completed'",
		"DROP TABLE "+sch+".paused_schedules",
		"DROP INDEX "+sch+".runs_group",
		"ALTER TABLE "+sch+".runs DROP COLUMN group_key",
		"DROP TABLE "+sch+".signals",
		"DROP INDEX "+sch+".runs_wait_key, "+sch+".runs_wait_due",
		"ALTER TABLE "+sch+".runs DROP COLUMN wait_key",
		"ALTER TABLE "+sch+".runs DROP CONSTRAINT runs_status_check, ADD CONSTRAINT runs_status_check "+
			"CHECK (status IN ('idle','running','completed','deferred','errored','dead-letter','fenced','cancelled'))",
		"ALTER TABLE "+sch+".effects DROP CONSTRAINT effects_status_check, ADD CONSTRAINT effects_status_check "+
			"CHECK (status IN ('started','completed','failed'))",
		"UPDATE "+sch+".schema_version SET version = 4",
	)
}

// TestWaitsMigrated: a schema of version 4 (no waits) is brought to
// version 5 (and on to the current one): its runs and effects read back
// as they were, and its runs can wait, be signalled, and keep signals;
// admissions can be grouped and schedules paused.
func TestWaitsMigrated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openIn(t, dir, pgstore.Options{})
	old := admitFlow(t, s, "p", t0, 0, "", "", 3)
	r := claimOne(t, s, old[0].ID, t0)
	if err := s.StartEffect(ctx, r.ID, r.Epoch, "fx", t0); err != nil {
		t.Fatal(err)
	}
	complete(t, s, r, t0)
	downgradeWaits(t, s)
	sch := s.Schema()
	s.Close()

	s = openIn(t, dir, pgstore.Options{Schema: sch})
	var v int
	if err := s.Pool().QueryRow(ctx, "SELECT version FROM "+sch+".schema_version").Scan(&v); err != nil || v != pgstore.SchemaVersion() || v < 5 {
		t.Fatalf("schema version %d, %v; want %d", v, err, pgstore.SchemaVersion())
	}
	if cols, ok := indexKeys(t, s, "runs")["runs_completed"]; ok {
		t.Fatalf("runs_completed (%s) after the migration, want it dropped (version 6)", cols)
	}
	for _, o := range old {
		got, err := s.Run(ctx, o.ID)
		if err != nil || got.WaitKey != "" || got.GroupKey != "" {
			t.Fatalf("run %s after the migration: %v %+v", o.ID, err, got)
		}
	}
	if e := effectOf(t, s, r.ID, "fx"); e.Status != store.EffectStarted {
		t.Errorf("effect after the migration: %+v", e)
	}
	w := waitAt(t, s, claimOne(t, s, old[1].ID, t0), "w", "k", t0, time.Time{})
	if w.Status != store.StatusWaiting || w.WaitKey != "k" {
		t.Fatalf("wait after the migration: %+v", w)
	}
	if res, err := s.Signal(ctx, store.SignalRequest{Key: "k", Now: t0}); err != nil || res.Woken == nil || res.Woken.ID != w.ID {
		t.Fatalf("signal after the migration: %v %+v", err, res)
	}
	if res, err := s.Signal(ctx, store.SignalRequest{Key: "k2", Now: t0, KeepUntil: t0.Add(time.Hour)}); err != nil || !res.Kept {
		t.Fatalf("kept signal after the migration: %v %+v", err, res)
	}
	if w := waitAt(t, s, claimOne(t, s, old[2].ID, t0), "w", "k2", t0, time.Time{}); w.Status != store.StatusIdle {
		t.Errorf("a wait did not take the kept signal: %s", w.Status)
	}
	g1 := admitGroup(t, s, "p", "g", store.GroupSingleton, t0, `1`)
	if g2 := admitGroup(t, s, "p", "g", store.GroupSingleton, t0, `2`); len(g1.Admitted) != 1 || len(g2.Grouped) != 1 || g2.Grouped[0].ID != g1.Admitted[0].ID {
		t.Errorf("a singleton after the migration: %+v then %+v", g1, g2)
	}
	if err := s.PauseSchedule(ctx, "daily", true, t0); err != nil {
		t.Fatal(err)
	}
	if ps, err := s.PausedSchedules(ctx); err != nil || !ps["daily"].Equal(t0) {
		t.Errorf("paused schedules after the migration: %v %v", ps, err)
	}
	checkCounts(t, s)
}
