package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella/internal/commithook"
	"github.com/yella-go/yella/store"
)

// holdWriter holds s's writer inside a batch of its own (the admission
// of an idle run "held" at now) until release, which returns once that
// batch has committed: what is queued meanwhile makes the next batch
// together.
func holdWriter(t *testing.T, s *Store, path string, now time.Time) (release func()) {
	t.Helper()
	entered, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	restore := commithook.Set(func(db string) error {
		if db == path {
			once.Do(func() { close(entered); <-done })
		}
		return nil
	})
	held := make(chan error, 1)
	go func() {
		_, err := s.Admit(context.Background(), store.Admission{Event: "e", Runs: []store.NewRun{{ID: "held", Process: "p"}}, Now: now})
		held <- err
	}()
	<-entered
	return func() {
		t.Helper()
		close(done)
		err := <-held
		restore()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// claimTogether makes the claims reqs while s's writer is held
// (holdWriter), so that they share one batch and its merged statements,
// each as owner and its index, at now with a lease of a minute, and
// returns what each claimed.
func claimTogether(t *testing.T, s *Store, path string, now time.Time, owner string, reqs []store.ClaimRequest) [][]store.Run {
	t.Helper()
	release := holdWriter(t, s, path, now)
	got := make([][]store.Run, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		req.Owner, req.Now, req.LeaseUntil = fmt.Sprintf("%s%d", owner, i), now, now.Add(time.Minute)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs, err := s.Claim(context.Background(), req)
			if err != nil {
				t.Error(err)
			}
			got[i] = rs
		}()
	}
	for len(s.cmds) < len(reqs) {
		time.Sleep(time.Millisecond)
	}
	before := s.Stats()
	release()
	wg.Wait()
	if d := s.Stats().MergedClaims - before.MergedClaims; d != int64(len(reqs)) {
		t.Fatalf("%d claims merged, want %d (all in one batch)", d, len(reqs))
	}
	return got
}

// TestClaimsMerged queues claims while the writer is held, so that they
// share one transaction and one statement: every run is claimed once, a
// run asked for twice goes to one asker, a request for several runs gets
// them in its order (one for more runs than a statement takes, too: its
// rows go in several), runs that cannot be claimed are left alone, and
// the counts follow.
func TestClaimsMerged(t *testing.T) {
	ctx := context.Background()
	s, path := openAt(t, "claims.db")
	now := time.Now()
	admit := func(id string, notBefore time.Time) {
		t.Helper()
		// Each run's own payload: the rows of a merged claim are read into
		// memory reused row to row (raw.go), and each must keep its own.
		a := store.Admission{Event: "e", Payload: json.RawMessage(`{"id":"` + id + `"}`), Runs: []store.NewRun{{ID: id, Process: "p"}}, Now: now, NotBefore: notBefore}
		if _, err := s.Admit(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		admit(fmt.Sprintf("r%d", i), time.Time{})
	}
	admit("dup", time.Time{})
	admit("x", time.Time{})
	admit("y", time.Time{})
	admit("later", now.Add(time.Hour)) // not claimable before its time
	var bulk []string
	for i := range 2*manyMax + 3 {
		bulk = append(bulk, fmt.Sprintf("b%d", i))
		admit(bulk[i], time.Time{})
	}

	var reqs []store.ClaimRequest
	for _, ids := range [][]string{{"dup"}, {"dup"}, {"y", "x"}, {"later"}, {"missing"}, bulk} {
		reqs = append(reqs, store.ClaimRequest{IDs: ids})
	}
	for i := range 10 {
		reqs = append(reqs, store.ClaimRequest{IDs: []string{fmt.Sprintf("r%d", i)}})
	}
	got := claimTogether(t, s, path, now, "o", reqs)

	if n := len(got[0]) + len(got[1]); n != 1 {
		t.Errorf("the run asked for twice was claimed %d times", n)
	}
	if len(got[2]) != 2 || got[2][0].ID != "y" || got[2][1].ID != "x" {
		t.Errorf("request for y, x got %v", got[2])
	}
	if len(got[3]) != 0 || len(got[4]) != 0 {
		t.Errorf("claimed a run not due or missing: %v %v", got[3], got[4])
	}
	if len(got[5]) != len(bulk) {
		t.Errorf("a request for %d runs got %d", len(bulk), len(got[5]))
	}
	for i, r := range got[5] {
		if r.ID != bulk[i] || r.LeaseOwner != "o5" || r.Epoch != 1 || string(r.Payload) != `{"id":"`+r.ID+`"}` {
			t.Fatalf("run %d of the large request: %+v", i, r)
		}
		if stored, err := s.Run(ctx, r.ID); err != nil || stored.Status != store.StatusRunning || stored.LeaseOwner != "o5" {
			t.Fatalf("%s stored as %+v, %v", r.ID, stored, err)
		}
	}
	for i, rs := range got[6:] {
		if len(rs) != 1 {
			t.Fatalf("r%d: %d runs", i, len(rs))
		}
		r := rs[0]
		owner := fmt.Sprintf("o%d", i+6)
		if r.ID != fmt.Sprintf("r%d", i) || r.Status != store.StatusRunning || r.Epoch != 1 || r.Attempts != 1 || r.LeaseOwner != owner ||
			!r.StartedAt.Equal(now) || !r.LeaseExpires.Equal(now.Add(time.Minute)) || string(r.Payload) != fmt.Sprintf(`{"id":"r%d"}`, i) {
			t.Errorf("r%d claimed as %+v", i, r)
		}
		stored, err := s.Run(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Status != store.StatusRunning || stored.Epoch != 1 || stored.LeaseOwner != owner || !stored.StartedAt.Equal(now) ||
			!stored.LeaseExpires.Equal(now.Add(time.Minute)) {
			t.Errorf("r%d stored as %+v", i, stored)
		}
	}
	counts, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(13 + len(bulk)); counts[store.StatusRunning] != want || counts[store.StatusIdle] != 2 { // idle: later and held
		t.Errorf("counts %v, want %d running and 2 idle", counts, want)
	}
}
