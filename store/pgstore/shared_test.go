package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella/internal/commithook"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

var idSeq atomic.Int64

func newID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), idSeq.Add(1))
}

// admit admits n root runs of process p, each under limit (0: none).
func admit(t *testing.T, s *pgstore.Store, p string, n, limit int) store.AdmitResult {
	t.Helper()
	runs := make([]store.NewRun, n)
	for i := range runs {
		runs[i] = store.NewRun{ID: newID(p), Process: p, Limit: limit}
	}
	res, err := s.Admit(context.Background(), store.Admission{Event: "ev", Runs: runs, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// holdFirstCommit holds the first batch the stores of schema commit from
// now on, right before COMMIT, until release is called: inCommit is closed
// once it is held.
func holdFirstCommit(t *testing.T, schema string) (inCommit <-chan struct{}, release func()) {
	var once sync.Once
	held := make(chan struct{})
	rel := make(chan struct{})
	restore := commithook.Set(func(db string) error {
		if db != "pgstore:"+schema {
			return nil
		}
		first := false
		once.Do(func() { first = true })
		if first {
			close(held)
			<-rel
		}
		return nil
	})
	var relOnce sync.Once
	release = func() { relOnce.Do(func() { close(rel); restore() }) }
	t.Cleanup(release)
	return held, release
}

// raceWhileHeld runs first, holds its commit, then runs second while it is
// held: second either waits for first (a lock it needs is held) or
// finishes meanwhile; after half a second (or second's end) first commits.
func raceWhileHeld(t *testing.T, schema string, first, second func()) {
	t.Helper()
	inCommit, release := holdFirstCommit(t, schema)
	done1 := make(chan struct{})
	go func() { defer close(done1); first() }()
	<-inCommit
	done2 := make(chan struct{})
	go func() { defer close(done2); second() }()
	select {
	case <-done2:
	case <-time.After(500 * time.Millisecond):
	}
	release()
	<-done1
	<-done2
}

func countStatus(t *testing.T, s *pgstore.Store, p string, sts ...store.Status) int64 {
	t.Helper()
	n, err := s.CountRuns(context.Background(), store.RunFilter{Process: p, Statuses: sts})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRunningCapExactAcrossNodes: two nodes claim a capped process at the
// same moment. The first holds its claim uncommitted; the second must not
// count around it (it waits for the process's claim lock, then counts the
// first's runs), so the cap holds across nodes.
func TestRunningCapExactAcrossNodes(t *testing.T) {
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	admit(t, a, "capped", 10, 0)
	claim := func(s *pgstore.Store, owner string) func() {
		return func() {
			now := time.Now()
			_, err := s.ClaimNext(context.Background(), store.ClaimNextRequest{Owner: owner, Now: now, LeaseUntil: now.Add(time.Minute),
				Processes: map[string]int{"capped": 3}, Limit: 10})
			if err != nil {
				t.Error(err)
			}
		}
	}
	raceWhileHeld(t, a.Schema(), claim(a, "node-a"), claim(b, "node-b"))
	if n := countStatus(t, a, "capped", store.StatusRunning); n != 3 {
		t.Errorf("%d runs of a process capped at 3 running across two nodes", n)
	}
}

// TestAdmissionBoundExactAcrossNodes: the same for the admission bound
// (Process.Concurrency plus its queue): two nodes admit a bounded process
// at the same moment, and the second counts the first's runs.
func TestAdmissionBoundExactAcrossNodes(t *testing.T) {
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	var ra, rb store.AdmitResult
	raceWhileHeld(t, a.Schema(), func() { ra = admit(t, a, "bounded", 3, 3) }, func() { rb = admit(t, b, "bounded", 3, 3) })
	if n := countStatus(t, a, "bounded", store.StatusIdle, store.StatusRunning); n != 3 {
		t.Errorf("%d runs of a process bounded at 3 admitted across two nodes", n)
	}
	if got := len(ra.Admitted) + len(rb.Admitted); got != 3 || len(ra.Dropped)+len(rb.Dropped) != 3 {
		t.Errorf("admitted %d and dropped %d, want 3 and 3", got, len(ra.Dropped)+len(rb.Dropped))
	}
}

// TestAdmitAnsweredAfterCommit: an admission is acknowledged only once its
// batch has committed: while the commit is held, Admit has not returned
// and another connection sees nothing.
func TestAdmitAnsweredAfterCommit(t *testing.T) {
	s := openIn(t, t.TempDir(), pgstore.Options{})
	inCommit, release := holdFirstCommit(t, s.Schema())
	answered := make(chan store.AdmitResult, 1)
	go func() { answered <- admit(t, s, "p", 1, 0) }()
	<-inCommit
	select {
	case <-answered:
		t.Fatal("Admit returned while its transaction was not committed")
	case <-time.After(200 * time.Millisecond):
	}
	if n := countStatus(t, s, "p"); n != 0 {
		t.Errorf("%d runs visible before the commit", n)
	}
	release()
	res := <-answered
	if len(res.Admitted) != 1 || countStatus(t, s, "p") != 1 {
		t.Errorf("after the commit: %d admitted, %d visible", len(res.Admitted), countStatus(t, s, "p"))
	}
}

// setSeen moves a node's last heartbeat back by ago (on the database's
// clock), as if it had stopped beating then.
func setSeen(t *testing.T, s *pgstore.Store, owner string, ago time.Duration) {
	t.Helper()
	_, err := s.Pool().Exec(context.Background(), "UPDATE "+s.Schema()+".nodes SET seen = now() - make_interval(secs => $2) WHERE owner = $1",
		owner, ago.Seconds())
	if err != nil {
		t.Fatal(err)
	}
}

// TestGoneNodeRunsTakenOver: a node's runs are abandoned as soon as its
// heartbeat, on the database's clock, is older than the timeout, however
// long their leases; not before, even for a caller whose clock is a day
// ahead. Once taken over, the gone node's completion and effect start are
// refused (fenced by the epoch).
func TestGoneNodeRunsTakenOver(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	leaveA, err := a.Join(ctx, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	defer leaveA(ctx)
	leaveB, err := b.Join(ctx, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	defer leaveB(ctx)
	id := admit(t, a, "p", 1, 0).Admitted[0].ID
	now := time.Now()
	rs, err := a.ClaimNext(ctx, store.ClaimNextRequest{Owner: "node-a", Now: now, LeaseUntil: now.Add(time.Hour), Processes: map[string]int{"p": 0}, Limit: 5})
	if err != nil || len(rs.Runs) != 1 {
		t.Fatalf("claim: %v, %d runs", err, len(rs.Runs))
	}
	r := rs.Runs[0]
	for _, at := range []time.Time{now, now.Add(24 * time.Hour)} {
		ab, err := b.Abandoned(ctx, "node-b", at, 10)
		if err != nil || len(ab) != 0 {
			t.Fatalf("a live node's run reported abandoned at %v: %v, %d runs", at, err, len(ab))
		}
	}
	setSeen(t, a, "node-a", time.Minute)
	ab, err := b.Abandoned(ctx, "node-b", now, 10)
	if err != nil || len(ab) != 1 || ab[0].ID != id {
		t.Fatalf("a gone node's run not reported abandoned: %v, %v", err, ab)
	}
	res, err := b.Update(ctx, store.Update{RunID: id, Epoch: r.Epoch, Reclaim: true, Action: store.ActionReclaim, To: store.StatusIdle, Now: now, Error: "lease expired"})
	if err != nil || res.Run.Status != store.StatusIdle {
		t.Fatalf("reclaim of a gone node's run (lease valid for an hour): %v, %s", err, res.Run.Status)
	}
	if _, err := b.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "node-b", Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, err = a.Update(ctx, store.Update{RunID: id, Epoch: r.Epoch, Action: store.ActionComplete, Now: now})
	if !errors.Is(err, store.ErrFenced) {
		t.Errorf("the gone node's completion: %v, want ErrFenced", err)
	}
	if err := a.StartEffect(ctx, id, r.Epoch, "k", now); !errors.Is(err, store.ErrFenced) {
		t.Errorf("the gone node's effect start: %v, want ErrFenced", err)
	}
	if got, _ := b.Run(ctx, id); got.Status != store.StatusRunning || got.LeaseOwner != "node-b" || got.Epoch != r.Epoch+1 {
		t.Errorf("after the late writes: %s by %s at epoch %d, want running by node-b at %d", got.Status, got.LeaseOwner, got.Epoch, r.Epoch+1)
	}
}

// TestGoneNodeAnnounced: the first node to see another's heartbeat too
// old marks it gone and tells every node, so they reclaim at once.
func TestGoneNodeAnnounced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// a stamps its heartbeat only when it joins.
	a := openIn(t, dir, pgstore.Options{NodeHeartbeat: time.Hour, NodeTimeout: 2 * time.Hour})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema(), NodeHeartbeat: 50 * time.Millisecond, NodeTimeout: 200 * time.Millisecond})
	c := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	gone := watchFor(t, c, store.ChangeGone)
	leaveA, err := a.Join(ctx, "silent")
	if err != nil {
		t.Fatal(err)
	}
	defer leaveA(ctx)
	leaveB, err := b.Join(ctx, "watcher")
	if err != nil {
		t.Fatal(err)
	}
	defer leaveB(ctx)
	select {
	case <-gone:
	case <-time.After(30 * time.Second):
		t.Fatal("no node heard that the silent node is gone")
	}
}

// TestJoinRefusesLiveOwner: two processes cannot be one node; an owner id
// whose node is gone may join again, and the runs it left are abandoned.
func TestJoinRefusesLiveOwner(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	if _, err := a.Join(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join(ctx, "n"); !errors.Is(err, pgstore.ErrOwnerLive) {
		t.Fatalf("second join of a live owner: %v, want ErrOwnerLive", err)
	}
	id := admit(t, a, "p", 1, 0).Admitted[0].ID
	now := time.Now()
	if _, err := a.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "n", Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	setSeen(t, a, "n", time.Minute)
	leave, err := b.Join(ctx, "n")
	if err != nil {
		t.Fatalf("join of a gone owner: %v", err)
	}
	defer leave(ctx)
	ab, err := b.Abandoned(ctx, "n", now, 10)
	if err != nil || len(ab) != 1 {
		t.Errorf("the runs an earlier process left under the owner: %v, %d abandoned, want 1", err, len(ab))
	}
}

// TestClaimNextReportsWhatIsLeft: a claim says whether idle runs are left
// and when the earliest delayed one is due.
func TestClaimNextReportsWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	ids := admit(t, s, "p", 3, 0).Admitted
	now := time.Now()
	later := now.Add(time.Hour)
	req := store.ClaimNextRequest{Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute), Processes: map[string]int{"p": 0}, Limit: 1}
	res, err := s.ClaimNext(ctx, req)
	if err != nil || len(res.Runs) != 1 || res.Runs[0].ID != ids[0].ID || !res.More || !res.NextAt.IsZero() {
		t.Fatalf("first claim: %v %+v", err, res)
	}
	if _, err := s.Update(ctx, store.Update{RunID: ids[0].ID, Epoch: res.Runs[0].Epoch, Action: store.ActionRetryLater, Now: now, RetryAt: later}); err != nil {
		t.Fatal(err)
	}
	req.Limit = 5
	res, err = s.ClaimNext(ctx, req)
	if err != nil || len(res.Runs) != 2 || !res.More || !res.NextAt.Equal(later) {
		t.Fatalf("second claim: %v, %d runs, more %v, next %v (want 2, true, %v)", err, len(res.Runs), res.More, res.NextAt, later)
	}
	req.Processes = map[string]int{"other": 0}
	if res, err = s.ClaimNext(ctx, req); err != nil || len(res.Runs) != 0 || res.More {
		t.Fatalf("claim of another process: %v %+v", err, res)
	}
}

// TestWatchHearsOtherStores: a store's watchers hear of runs another store
// (another node) admitted.
func TestWatchHearsOtherStores(t *testing.T) {
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	time.Sleep(100 * time.Millisecond) // b's listener reports its own connection first
	ready := watchFor(t, b, store.ChangeReady)
	admit(t, a, "p", 1, 0)
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("no notification of another store's admission")
	}
}

// TestSchemaVersionChecked: a schema written by a newer version is refused
// with a clear error; several stores migrating one new schema at once
// migrate it once.
func TestSchemaVersionChecked(t *testing.T) {
	pgURL(t) // skips here, not in the goroutines below, without a server
	dir := t.TempDir()
	var wg sync.WaitGroup
	stores := make([]*pgstore.Store, 3)
	for i := range stores {
		wg.Add(1)
		go func() { defer wg.Done(); stores[i] = openIn(t, dir, pgstore.Options{}) }()
	}
	wg.Wait()
	s := stores[0]
	if _, err := s.Pool().Exec(context.Background(), "UPDATE "+s.Schema()+".schema_version SET version = 99"); err != nil {
		t.Fatal(err)
	}
	_, err := pgstore.Open(context.Background(), pgURL(t), pgstore.Options{Schema: s.Schema()})
	if !errors.Is(err, pgstore.ErrNewerSchema) || !strings.Contains(err.Error(), "upgrade yella") {
		t.Errorf("open of a newer schema: %v, want ErrNewerSchema", err)
	}
	if _, err := pgstore.Open(context.Background(), pgURL(t), pgstore.Options{Schema: "Bad-Name"}); err == nil || !strings.Contains(err.Error(), "Options.Schema") {
		t.Errorf("open with a bad schema name: %v", err)
	}
}

// TestFollowUpsCommitWithCompletion: a completion and the follow-up runs
// it admits are one transaction: while its commit is held, another
// connection sees neither; after it, both. Both when the statement that
// ends the run inserts them and when one of their own does.
func TestFollowUpsCommitWithCompletion(t *testing.T) {
	for _, held := range []bool{true, false} {
		t.Run(map[bool]string{true: "held", false: "not held"}[held], func(t *testing.T) { followUpsCommitWithCompletion(t, held) })
	}
}

// followUpsCommitWithCompletion ends the parent through the store that
// claimed it (held: the end's statement inserts the follow-up) or through
// another store on the same schema (a statement of its own).
func followUpsCommitWithCompletion(t *testing.T, held bool) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openIn(t, dir, pgstore.Options{})
	parent := admit(t, s, "p", 1, 0).Admitted[0]
	now := time.Now()
	rs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{parent.ID}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil || len(rs) != 1 {
		t.Fatalf("claim: %v", err)
	}
	if !held {
		s = openIn(t, dir, pgstore.Options{Schema: s.Schema()})
	}
	child := newID("child")
	inCommit, release := holdFirstCommit(t, s.Schema())
	done := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, store.Update{RunID: parent.ID, Epoch: rs[0].Epoch, Action: store.ActionComplete, Now: now, Then: "next", RequireChildren: true,
			Children: &store.Admission{Event: "next", ParentID: parent.ID, CorrelationID: parent.ID, Depth: 1, Now: now, Runs: []store.NewRun{{ID: child, Process: "c"}}}})
		done <- err
	}()
	<-inCommit
	if _, err := s.Run(ctx, child); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the follow-up is visible before its parent's completion commits: %v", err)
	}
	if r, _ := s.Run(ctx, parent.ID); r.Status != store.StatusRunning {
		t.Errorf("the parent is %s before its completion commits", r.Status)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r, err := s.Run(ctx, child); err != nil || r.ParentID != parent.ID {
		t.Errorf("the follow-up after the commit: %v %+v", err, r)
	}
}

// TestQueuedEffectEndWithWriters: with several writers a node's writes
// may commit out of order, so a queued effect end is written before
// QueueFinishEffect returns, not after: while its commit is held the call
// has not returned, and once it returns the effect is completed for
// every reader.
func TestQueuedEffectEndWithWriters(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{Writers: 2})
	r := admit(t, s, "p", 1, 0).Admitted[0]
	now := time.Now()
	rs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{r.ID}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil || len(rs) != 1 {
		t.Fatalf("claim: %v", err)
	}
	if err := s.StartEffect(ctx, r.ID, rs[0].Epoch, "k", now); err != nil {
		t.Fatal(err)
	}
	inCommit, release := holdFirstCommit(t, s.Schema())
	returned := make(chan func() error, 1)
	go func() {
		returned <- s.QueueFinishEffect(ctx, r.ID, rs[0].Epoch, "k", store.EffectCompleted, []byte(`1`), "", now)
	}()
	<-inCommit
	select {
	case <-returned:
		t.Fatal("QueueFinishEffect returned while its write was not committed")
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if err := (<-returned)(); err != nil {
		t.Fatal(err)
	}
	effs, err := s.Effects(ctx, r.ID)
	if err != nil || len(effs) != 1 || effs[0].Status != store.EffectCompleted {
		t.Fatalf("the effect once the call returned: %v %+v", err, effs)
	}
}
