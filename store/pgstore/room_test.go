package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// TestClaimTakesItsRoomWhenItRuns: a claim with a Room asks it for the
// caller's free slots when the claim runs, not when it is requested: a
// claim queued while the writer commits the batch before it takes the
// room its caller has once that batch is done, and says which bound it
// applied. Room bounds Limit, never raises it; for a capped process the
// same (its claim is a statement of its own).
func TestClaimTakesItsRoomWhenItRuns(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		cap  int
	}{{"uncapped", 0}, {"capped", 100}} {
		t.Run(c.name, func(t *testing.T) {
			s := openIn(t, t.TempDir(), pgstore.Options{})
			admit(t, s, "p", 20, 0)
			now := time.Now()
			var room atomic.Int64
			room.Store(2)
			req := store.ClaimNextRequest{Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute), Processes: map[string]int{"p": c.cap},
				Limit: 10, Room: func() int { return int(room.Load()) }}

			// The writer holds an admission's batch; the claim waits behind
			// it, and the room grows meanwhile.
			inCommit, release := holdFirstCommit(t, s.Schema())
			admitted := make(chan struct{})
			go func() { defer close(admitted); admit(t, s, "q", 1, 0) }()
			<-inCommit
			claimed := make(chan store.ClaimNextResult, 1)
			calling := make(chan struct{})
			go func() {
				close(calling)
				res, err := s.ClaimNext(ctx, req)
				if err != nil {
					t.Error(err)
				}
				claimed <- res
			}()
			<-calling
			time.Sleep(100 * time.Millisecond) // the claim is queued behind the held batch
			room.Store(5)
			release()
			<-admitted
			res := <-claimed
			if len(res.Runs) != 5 || res.Limit != 5 {
				t.Fatalf("claim queued at room 2, run at room 5: %d runs, limit %d; want 5 and 5", len(res.Runs), res.Limit)
			}

			room.Store(50)
			if res, err := s.ClaimNext(ctx, req); err != nil || len(res.Runs) != 10 || res.Limit != 10 {
				t.Fatalf("room 50, limit 10: %v, %d runs, limit %d; want 10 and 10", err, len(res.Runs), res.Limit)
			}
			req.Room = nil
			if res, err := s.ClaimNext(ctx, req); err != nil || len(res.Runs) != 5 || res.Limit != 10 || res.More {
				t.Fatalf("no room, limit 10, 5 runs left: %v, %d runs, limit %d, more %v; want 5, 10, false", err, len(res.Runs), res.Limit, res.More)
			}
		})
	}
}

// TestHeldEffectStartFenced: an effect start of a run this store claimed
// goes by the run's seq (no id lookup) and still carries the attempt's
// epoch: once another node has taken the run over (its epoch raised),
// the stale attempt's start is refused and writes nothing, while the
// start of an attempt still holding its lease applies.
func TestHeldEffectStartFenced(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	admit(t, s, "p", 2, 0)
	now := time.Now()
	rs := claimP(t, s, now, 2)
	kept, taken := rs[0], rs[1]
	sch := s.Schema()
	// Another node takes the second run over: a claim of its own raises
	// the epoch.
	execAll(t, s, "UPDATE "+sch+".runs SET epoch = epoch + 1, lease_node = "+otherNode(t, s)+" WHERE seq = "+strconv.FormatInt(taken.Seq, 10))
	if err := s.StartEffect(ctx, kept.ID, kept.Epoch, "k", now); err != nil {
		t.Fatalf("effect start of a run still held: %v", err)
	}
	if err := s.StartEffect(ctx, taken.ID, taken.Epoch, "k", now); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("effect start of a run taken over: %v, want ErrFenced", err)
	}
	effs, err := s.Effects(ctx, taken.ID)
	if err != nil || len(effs) != 0 {
		t.Fatalf("effects of the run taken over: %v, %+v; want none", err, effs)
	}
	if effs, err := s.Effects(ctx, kept.ID); err != nil || len(effs) != 1 || effs[0].Status != store.EffectStarted {
		t.Fatalf("effects of the run still held: %v, %+v; want one started", err, effs)
	}
}

// TestHeldEffectOutcomesWithEnds: the effect outcomes of runs this store
// claimed are written in the statement of a batch's attempt ends of
// such runs (one statement for both, by seq). In one batch: an outcome
// and the end of its run, an outcome whose run's end is not in the
// batch, and an outcome and an end of a run taken over by another node,
// whose effect its new attempt started again: the first two outcomes
// and the first end apply; the stale outcome and end are refused and
// change nothing.
func TestHeldEffectOutcomesWithEnds(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	admit(t, s, "p", 3, 0)
	now := time.Now()
	rs := claimP(t, s, now, 3)
	ended, open, taken := rs[0], rs[1], rs[2]
	for _, r := range rs {
		if err := s.StartEffect(ctx, r.ID, r.Epoch, "k", now); err != nil {
			t.Fatal(err)
		}
	}
	// Another node takes the third run over and starts its effect again.
	seq := strconv.FormatInt(taken.Seq, 10)
	execAll(t, s, "UPDATE "+s.Schema()+".runs SET epoch = epoch + 1, lease_node = "+otherNode(t, s)+" WHERE seq = "+seq,
		"UPDATE "+s.Schema()+".effects SET epoch = epoch + 1 WHERE run_seq = "+seq)

	// The writer holds an admission's batch; the outcomes and ends are
	// queued behind it, so they share the next one.
	before := s.Stats()
	inCommit, release := holdFirstCommit(t, s.Schema())
	admitted := make(chan struct{})
	go func() { defer close(admitted); admit(t, s, "q", 1, 0) }()
	<-inCommit
	var waits []func() error
	for _, r := range rs {
		waits = append(waits, s.QueueFinishEffect(ctx, r.ID, r.Epoch, "k", store.EffectCompleted, []byte(`"`+r.ID+`"`), "", now))
	}
	endErrs := make([]chan error, 2)
	for i, r := range []store.Run{ended, taken} {
		endErrs[i] = make(chan error, 1)
		go func() {
			_, err := s.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Action: store.ActionComplete, Now: now})
			endErrs[i] <- err
		}()
	}
	time.Sleep(100 * time.Millisecond) // the ends are queued behind the held batch
	release()
	<-admitted
	for i, w := range waits {
		err := w()
		if want := i < 2; (err == nil) != want {
			t.Errorf("outcome of run %d: %v, want applied %v", i, err, want)
		}
		if i == 2 && !errors.Is(err, store.ErrFenced) {
			t.Errorf("outcome of the run taken over: %v, want ErrFenced", err)
		}
	}
	if err := <-endErrs[0]; err != nil {
		t.Errorf("end of a run still held: %v", err)
	}
	if err := <-endErrs[1]; !errors.Is(err, store.ErrFenced) {
		t.Errorf("end of the run taken over: %v, want ErrFenced", err)
	}
	if after := s.Stats(); after.Batches-before.Batches != 2 {
		t.Errorf("%d batches for the admission and the outcomes and ends; want 2 (the test did not put them in one batch)", after.Batches-before.Batches)
	}
	for _, c := range []struct {
		r      store.Run
		status store.EffectStatus
		output string
	}{{ended, store.EffectCompleted, `"` + ended.ID + `"`}, {open, store.EffectCompleted, `"` + open.ID + `"`}, {taken, store.EffectStarted, ""}} {
		effs, err := s.Effects(ctx, c.r.ID)
		if err != nil || len(effs) != 1 || effs[0].Status != c.status || string(effs[0].Output) != c.output {
			t.Errorf("effects of run %s: %v, %+v; want one %s with output %q", c.r.ID, err, effs, c.status, c.output)
		}
	}
	for r, want := range map[string]store.Status{ended.ID: store.StatusCompleted, open.ID: store.StatusRunning, taken.ID: store.StatusRunning} {
		got, err := s.Run(ctx, r)
		if err != nil || got.Status != want {
			t.Errorf("run %s: %v, %s; want %s", r, err, got.Status, want)
		}
	}
}

// TestNewEffectStarts: the start of an effect key a run held from its
// first claim has no record of is a plain insert; every other start is
// an upsert. So in one attempt an effect that failed starts again (its
// record exists), a run claimed again after an attempt that recorded an
// effect starts it again, and stale attempts' starts (of a key the run's
// new holder started, of a key of a run claimed before) are refused,
// never an error.
func TestNewEffectStarts(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	admit(t, s, "p", 2, 0)
	now := time.Now()
	status := func(r store.Run) (store.EffectStatus, int64) {
		t.Helper()
		effs, err := s.Effects(ctx, r.ID)
		if err != nil || len(effs) != 1 {
			t.Fatalf("effects of %s: %v, %+v; want one", r.ID, err, effs)
		}
		return effs[0].Status, effs[0].Epoch
	}
	rs := claimP(t, s, now, 2)
	r, stale := rs[0], rs[1]
	if r.Epoch != 1 {
		t.Fatalf("first claim at epoch %d", r.Epoch)
	}
	// One attempt: the effect fails and starts again.
	if err := s.StartEffect(ctx, r.ID, r.Epoch, "k", now); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if err := s.FinishEffect(ctx, r.ID, r.Epoch, "k", store.EffectFailed, nil, "boom", now); err != nil {
		t.Fatal(err)
	}
	if err := s.StartEffect(ctx, r.ID, r.Epoch, "k", now); err != nil {
		t.Fatalf("start again after a failure, same attempt: %v", err)
	}
	if st, ep := status(r); st != store.EffectStarted || ep != 1 {
		t.Fatalf("after the second start: %s at epoch %d, want started at 1", st, ep)
	}
	// The attempt fails; the next one, from a claim at epoch 2, records
	// the effect's failure and starts it again.
	if err := s.FinishEffect(ctx, r.ID, r.Epoch, "k", store.EffectFailed, nil, "boom", now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Action: store.ActionRetryLater, Now: now, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	r2 := claimP(t, s, now, 1)[0]
	if r2.ID != r.ID || r2.Epoch != 2 {
		t.Fatalf("claimed %s at epoch %d, want %s at 2", r2.ID, r2.Epoch, r.ID)
	}
	if err := s.StartEffect(ctx, r2.ID, r2.Epoch, "k", now); err != nil {
		t.Fatalf("start in the second attempt: %v", err)
	}
	if st, ep := status(r2); st != store.EffectStarted || ep != 2 {
		t.Fatalf("after the second attempt's start: %s at epoch %d, want started at 2", st, ep)
	}
	// Another node takes the run over: the second attempt's start of
	// another key (an upsert: the run's claim was not its first) is
	// refused and writes nothing.
	execAll(t, s, "UPDATE "+s.Schema()+".runs SET epoch = epoch + 1, lease_node = "+otherNode(t, s)+" WHERE seq = "+strconv.FormatInt(r2.Seq, 10))
	if err := s.StartEffect(ctx, r2.ID, r2.Epoch, "k2", now); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale second attempt's start: %v, want ErrFenced", err)
	}
	if effs, err := s.Effects(ctx, r2.ID); err != nil || len(effs) != 1 {
		t.Fatalf("effects after the stale start: %v, %+v; want only k", err, effs)
	}
	// Another node takes the other run over and starts the effect; the
	// stale attempt's start, of a key new to it, is refused.
	seq := strconv.FormatInt(stale.Seq, 10)
	execAll(t, s, "UPDATE "+s.Schema()+".runs SET epoch = epoch + 1, lease_node = "+otherNode(t, s)+" WHERE seq = "+seq,
		"INSERT INTO "+s.Schema()+".effects (run_seq, key, status, epoch, started_at) VALUES ("+seq+", 'k', 'started', 2, 1)")
	if err := s.StartEffect(ctx, stale.ID, stale.Epoch, "k", now); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale attempt's start: %v, want ErrFenced", err)
	}
	if st, ep := status(stale); st != store.EffectStarted || ep != 2 {
		t.Fatalf("the new holder's record: %s at epoch %d, want started at 2", st, ep)
	}
}

// TestHeldFollowUpsWithEnds: the follow-up runs of ends of held runs are
// inserted by the ends' statement, only for the ends that apply. In one
// batch: an end with two follow-ups, an end with a follow-up and its
// effect's outcome, and the stale end (with a follow-up) of a run another
// node took over. The first two commit with their follow-ups, each
// answered with its seq; the stale end is refused and admits nothing;
// the status counts count the follow-ups that exist.
func TestHeldFollowUpsWithEnds(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	admit(t, s, "p", 3, 0)
	now := time.Now()
	rs := claimP(t, s, now, 3)
	two, withEffect, taken := rs[0], rs[1], rs[2]
	if err := s.StartEffect(ctx, withEffect.ID, withEffect.Epoch, "k", now); err != nil {
		t.Fatal(err)
	}
	execAll(t, s, "UPDATE "+s.Schema()+".runs SET epoch = epoch + 1, lease_node = "+otherNode(t, s)+" WHERE seq = "+strconv.FormatInt(taken.Seq, 10))

	before := s.Stats()
	inCommit, release := holdFirstCommit(t, s.Schema())
	admitted := make(chan struct{})
	go func() { defer close(admitted); admit(t, s, "q", 1, 0) }()
	<-inCommit
	outcome := s.QueueFinishEffect(ctx, withEffect.ID, withEffect.Epoch, "k", store.EffectCompleted, []byte(`1`), "", now)
	follow := map[string][]string{two.ID: {"f-two-a", "f-two-b"}, withEffect.ID: {"f-effect"}, taken.ID: {"f-stale"}}
	type ended struct {
		res store.UpdateResult
		err error
	}
	ends := map[string]chan ended{}
	for _, r := range rs {
		ch := make(chan ended, 1)
		ends[r.ID] = ch
		var runs []store.NewRun
		for _, id := range follow[r.ID] {
			runs = append(runs, store.NewRun{ID: id, Process: "next"})
		}
		go func() {
			res, err := s.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Action: store.ActionComplete, Now: now, Then: "e2", Output: []byte(`"out"`),
				Children: &store.Admission{Event: "e2", Payload: []byte(`"out"`), ParentID: r.ID, CorrelationID: r.ID, Depth: 1, Now: now, Runs: runs}})
			ch <- ended{res, err}
		}()
	}
	time.Sleep(100 * time.Millisecond) // the ends are queued behind the held batch
	release()
	<-admitted
	if err := outcome(); err != nil {
		t.Errorf("effect outcome with its run's end: %v", err)
	}
	for _, r := range []store.Run{two, withEffect} {
		e := <-ends[r.ID]
		if e.err != nil {
			t.Fatalf("end of %s: %v", r.ID, e.err)
		}
		var got []string
		for _, a := range e.res.Children.Admitted {
			got = append(got, a.ID)
			stored, err := s.Run(ctx, a.ID)
			if err != nil || stored.Seq != a.Seq || a.Seq == 0 || stored.Status != store.StatusIdle || stored.ParentID != r.ID ||
				stored.CorrelationID != r.ID || string(stored.Payload) != `"out"` {
				t.Errorf("follow-up %s answered with seq %d; stored: %v, %+v", a.ID, a.Seq, err, stored)
			}
		}
		if !slices.Equal(got, follow[r.ID]) {
			t.Errorf("end of %s admitted %v, want %v", r.ID, got, follow[r.ID])
		}
	}
	if e := <-ends[taken.ID]; !errors.Is(e.err, store.ErrFenced) || len(e.res.Children.Admitted) != 0 {
		t.Errorf("stale end: %v, admitted %+v; want ErrFenced and none", e.err, e.res.Children.Admitted)
	}
	if _, err := s.Run(ctx, "f-stale"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the stale end's follow-up: %v, want ErrNotFound", err)
	}
	if after := s.Stats(); after.Batches-before.Batches != 2 {
		t.Errorf("%d batches for the admission and the ends; want 2 (the test did not put them in one batch)", after.Batches-before.Batches)
	}
	effs, err := s.Effects(ctx, withEffect.ID)
	if err != nil || len(effs) != 1 || effs[0].Status != store.EffectCompleted {
		t.Errorf("effect of %s: %v, %+v; want completed", withEffect.ID, err, effs)
	}
	counts, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Idle: the three follow-ups and the admission's run; running: the
	// run taken over.
	if counts[store.StatusIdle] != 4 || counts[store.StatusRunning] != 1 || counts[store.StatusCompleted] != 2 {
		t.Errorf("status counts %v; want 4 idle, 1 running, 2 completed", counts)
	}
}

// claimP claims n runs of process "p" for owner "o" at now, with a
// minute's lease, through ClaimNext (so the store holds them), and fails
// the test unless it gets n.
func claimP(t *testing.T, s *pgstore.Store, now time.Time, n int) []store.Run {
	t.Helper()
	res, err := s.ClaimNext(context.Background(), store.ClaimNextRequest{Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute),
		Processes: map[string]int{"p": 0}, Limit: n})
	if err != nil || len(res.Runs) != n {
		t.Fatalf("claim: %v, %d runs, want %d", err, len(res.Runs), n)
	}
	return res.Runs
}

// otherNode is the number of the lease owner "other" in s's owners table
// (added if missing), as another node's claim writes it.
func otherNode(t *testing.T, s *pgstore.Store) string {
	t.Helper()
	var n int32
	err := s.Pool().QueryRow(context.Background(), `WITH i AS (INSERT INTO `+s.Schema()+`.owners (owner) VALUES ('other') ON CONFLICT (owner) DO NOTHING RETURNING num)
		SELECT num FROM i UNION ALL SELECT num FROM `+s.Schema()+`.owners WHERE owner = 'other'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(int(n))
}

// TestFollowUpsStartedByTheirEnd: an attempt end's follow-up runs that
// its admission starts (store.Admission.Start) are admitted running,
// claimed by the start's owner at epoch 1 as a claim leaves a run: no
// other node claims them, their own ends apply at that epoch (and are
// fenced at another), and the status counts say running. Runs that
// something holds back at admission (a bound, a flow key, a group key, a
// delay), runs not marked, and runs of an owner this store never claimed
// for are admitted idle, as without Start.
func TestFollowUpsStartedByTheirEnd(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	admit(t, s, "p", 4, 0)
	now := time.Now().Truncate(time.Microsecond)
	rs := claimP(t, s, now, 4)
	lease := now.Add(time.Minute)
	end := func(r store.Run, a *store.Admission) store.UpdateResult {
		t.Helper()
		a.Event, a.ParentID, a.CorrelationID, a.Depth, a.Now = "e2", r.ID, r.ID, 1, now
		res, err := s.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Action: store.ActionComplete, Now: now, Then: "e2", Children: a})
		if err != nil {
			t.Fatalf("end of %s: %v", r.ID, err)
		}
		return res
	}
	res := end(rs[0], &store.Admission{Start: &store.Start{Owner: "o", LeaseUntil: lease}, Runs: []store.NewRun{
		{ID: "started", Process: "next", Start: true},
		{ID: "unmarked", Process: "next"},
		{ID: "rated", Process: "next", Start: true, RateKey: "k"},
		{ID: "keyed", Process: "next", Start: true, ConcurrencyKey: "k"},
		{ID: "grouped", Process: "next", Start: true, GroupKey: "g"},
	}})
	delayed := end(rs[1], &store.Admission{Start: &store.Start{Owner: "o", LeaseUntil: lease}, NotBefore: now.Add(time.Hour),
		Runs: []store.NewRun{{ID: "delayed", Process: "next", Start: true}}})
	stranger := end(rs[2], &store.Admission{Start: &store.Start{Owner: "stranger", LeaseUntil: lease},
		Runs: []store.NewRun{{ID: "stranger's", Process: "next", Start: true}}})
	bounded := end(rs[3], &store.Admission{Start: &store.Start{Owner: "o", LeaseUntil: lease},
		Runs: []store.NewRun{{ID: "bounded", Process: "next", Start: true, Limit: 10}}})
	admitted := slices.Concat(res.Children.Admitted, delayed.Children.Admitted, stranger.Children.Admitted, bounded.Children.Admitted)
	if len(admitted) != 8 {
		t.Fatalf("admitted %+v, want 8 runs", admitted)
	}
	for _, a := range admitted {
		stored, err := s.Run(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a.ID != "started" {
			if a.Status != store.StatusIdle || stored.Status != store.StatusIdle || stored.Epoch != 0 || stored.LeaseOwner != "" {
				t.Errorf("%s: answered %s, stored %+v; want idle", a.ID, a.Status, stored)
			}
			continue
		}
		if a.Status != store.StatusRunning || a.Epoch != 1 || a.Attempts != 1 || a.LeaseOwner != "o" || !a.LeaseExpires.Equal(lease) ||
			!a.StartedAt.Equal(now) {
			t.Errorf("started: answered %+v; want running at epoch 1, leased to o until %v, started at %v", a, lease, now)
		}
		if stored.Status != store.StatusRunning || stored.Epoch != 1 || stored.Attempts != 1 || stored.LeaseOwner != "o" ||
			!stored.LeaseExpires.Equal(lease) || !stored.StartedAt.Equal(now) {
			t.Errorf("started: stored %+v; want running at epoch 1, leased to o until %v, started at %v", stored, lease, now)
		}
	}
	counts, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[store.StatusRunning] != 1 || counts[store.StatusIdle] != 7 || counts[store.StatusCompleted] != 4 {
		t.Errorf("counts %v; want 1 running (the started run), 7 idle, 4 completed", counts)
	}
	other, err := s.ClaimNext(ctx, store.ClaimNextRequest{Owner: "other", Now: now, LeaseUntil: lease, Processes: map[string]int{"next": 0}, Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range other.Runs {
		if r.ID == "started" {
			t.Errorf("another node claimed the started run")
		}
	}
	if _, err := s.Update(ctx, store.Update{RunID: "started", Epoch: 2, Action: store.ActionComplete, Now: now}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("end of the started run at epoch 2: %v, want ErrFenced", err)
	}
	done, err := s.Update(ctx, store.Update{RunID: "started", Epoch: 1, Action: store.ActionComplete, Now: now, Output: []byte(`1`)})
	if err != nil || done.Run.Status != store.StatusCompleted {
		t.Errorf("end of the started run at epoch 1: %v, %+v; want completed", err, done.Run)
	}
}
