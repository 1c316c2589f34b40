package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// TestOneTripBatchFailsWhole: a batch sent with its COMMIT in one round
// trip whose statement fails (here the effect starts, one of which has a
// key with a NUL byte, which PostgreSQL's text refuses: the engine never
// sends one) commits nothing: its COMMIT is never run, and each command
// is then tried alone, so the bad one fails and the others commit, each
// once.
func TestOneTripBatchFailsWhole(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "onetripfail")
	now := time.Now()
	ids := []string{"good", "bad", "effect"}
	for _, id := range ids {
		if _, err := s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: id, Process: "p"}}, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := s.Claim(ctx, store.ClaimRequest{IDs: ids, Owner: "o", Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil || len(rs) != 3 {
		t.Fatalf("claim: %v, %d runs", err, len(rs))
	}
	epoch := map[string]int64{}
	for _, r := range rs {
		epoch[r.ID] = r.Epoch
	}

	// Hold a first batch at its commit, queue the three commands behind
	// it, and remove the hook before letting them go: their batch is
	// built with no hook installed, so it goes in one round trip.
	rel, restore := holdFirstBatch(ctx, s, now)
	defer restore()
	errs := make(chan error, 3)
	go func() {
		_, err := s.Update(ctx, store.Update{RunID: "good", Epoch: epoch["good"], Action: store.ActionComplete, Now: now})
		errs <- err
	}()
	go func() {
		err := errors.New("the effect start with a NUL byte in its key was accepted")
		if s.StartEffect(ctx, "bad", epoch["bad"], "k\x00", now) != nil {
			err = nil
		}
		errs <- err
	}()
	go func() { errs <- s.StartEffect(ctx, "effect", epoch["effect"], "k", now) }()
	for len(s.cmds) < 3 {
		time.Sleep(time.Millisecond)
	}
	trips := s.Stats().OneTrip
	restore()
	close(rel)
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// The batch failed whole; the end and the good effect start were
	// each committed alone, in one round trip.
	if d := s.Stats().OneTrip - trips; d != 2 {
		t.Errorf("%d batches committed in one round trip after the release, want 2 (the good end, the effect start, each alone)", d)
	}
	for id, want := range map[string]store.Status{"good": store.StatusCompleted, "bad": store.StatusRunning, "effect": store.StatusRunning} {
		r, err := s.Run(ctx, id)
		if err != nil || r.Status != want || r.Epoch != epoch[id] {
			t.Errorf("run %s: %v, %s at epoch %d; want %s at epoch %d", id, err, r.Status, r.Epoch, want, epoch[id])
		}
	}
	for id, want := range map[string]int{"effect": 1, "bad": 0} {
		effs, err := s.Effects(ctx, id)
		if err != nil || len(effs) != want || want == 1 && effs[0].Status != store.EffectStarted {
			t.Errorf("the effect records of %s: %v %+v; want %d, started", id, err, effs, want)
		}
	}
	counts, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range store.Statuses {
		n, err := s.CountRuns(ctx, store.RunFilter{Statuses: []store.Status{st}})
		if err != nil {
			t.Fatal(err)
		}
		if counts[st] != n {
			t.Errorf("Counts says %d %s runs, CountRuns %d", counts[st], st, n)
		}
	}
}

// TestPGText: messages are kept as they are unless PostgreSQL's text
// cannot hold them; then each NUL byte and each invalid sequence becomes
// U+FFFD, and nothing else changes.
func TestPGText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"ünïcode ✓", "ünïcode ✓"},
		{"a\x00b", "a\uFFFDb"},
		{"\x00\x00", "\uFFFD\uFFFD"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{"cut \xe2\x9c", "cut \uFFFD"},
		{"both \x00 and \xc3", "both \uFFFD and \uFFFD"},
	} {
		if got := pgText(c.in); got != c.want {
			t.Errorf("pgText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
