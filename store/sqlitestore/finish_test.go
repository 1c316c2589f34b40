package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// TestAttemptEndsMerged: attempt ends that share one transaction, and so
// one statement, leave exactly what the same ends leave one at a time:
// the same answers (fenced and unknown runs included), runs, timelines
// and counts. The ends cover every field an end writes, outputs and
// strings whose exact bytes must survive (whitespace, invalid UTF-8, a
// NUL), two ends of one run, ends whose timeline entries are not
// implicit, runs with every field an admission sets and a run in its
// second attempt. Half of the merged ends find their runs' claims in the
// writer's memory (the statement that returns nothing, its runs being
// their claims' with the ends' writes), half read their runs back.
func TestAttemptEndsMerged(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 123456789)
	const runs = 22
	open := func(name string) (*Store, string) {
		t.Helper()
		s, path := openAt(t, name)
		claim := func(id string) {
			t.Helper()
			got, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
			if err != nil || len(got) != 1 {
				t.Fatalf("claim %s: %v %v", id, got, err)
			}
		}
		for i := range runs {
			id := fmt.Sprintf("r%d", i)
			nr := store.NewRun{ID: id, Process: "p"}
			a := store.Admission{Event: "e", Payload: json.RawMessage(`{}`), Runs: []store.NewRun{nr}, Now: now}
			if i%4 == 1 || i%4 == 2 { // read back, and held from the claim (below)
				a.IdempotencyKey = "k" + id
				a.Runs[0].Priority, a.Runs[0].RateKey, a.Runs[0].ConcurrencyKey, a.Runs[0].GroupKey = 3, "rate", "conc", "group"
			}
			if _, err := s.Admit(ctx, a); err != nil {
				t.Fatal(err)
			}
			claim(id)
			if i == 16 { // its first attempt retried, with a version the second keeps
				if _, err := s.Update(ctx, store.Update{RunID: id, Now: now, Action: store.ActionRetryLater, Epoch: 1, Error: "once", RetryAt: now, Version: "v1"}); err != nil {
					t.Fatal(err)
				}
				claim(id)
			}
		}
		return s, path
	}
	at := now.Add(time.Second)
	end := func(id string, a store.Action, f func(u *store.Update)) store.Update {
		u := store.Update{RunID: id, Now: at, Action: a, Epoch: 1}
		if f != nil {
			f(&u)
		}
		return u
	}
	ends := []store.Update{
		end("r0", store.ActionComplete, func(u *store.Update) { // held in the merged batch, as every even run
			u.Output, u.Then, u.Version = json.RawMessage("{\"a\":  1,\n \"b\": \"<&>\"}"), "then0", "v0"
		}),
		end("r1", store.ActionComplete, nil),
		end("r2", store.ActionComplete, func(u *store.Update) { u.Output = json.RawMessage{} }),
		end("r3", store.ActionComplete, func(u *store.Update) { u.Output, u.Version, u.Then = json.RawMessage(`7`), "v2", "next" }),
		end("r4", store.ActionRetryLater, func(u *store.Update) { u.Error, u.ErrorCode, u.RetryAt = "boom ✓", "E1", at.Add(time.Minute) }),
		end("r5", store.ActionDeadLetter, func(u *store.Update) { u.Error = "gave up" }),
		end("r6", store.ActionFail, func(u *store.Update) { u.Error = "bad \xff bytes" }), // not valid UTF-8
		end("r7", store.ActionFail, func(u *store.Update) { u.Error = "nul \x00 inside" }),
		end("r8", store.ActionComplete, func(u *store.Update) { u.Epoch = 5 }), // fenced
		end("missing", store.ActionComplete, nil),
		end("r9", store.ActionComplete, func(u *store.Update) { u.Output = json.RawMessage(`1`) }),
		end("r9", store.ActionComplete, func(u *store.Update) { u.Output = json.RawMessage(`2`) }), // the run's second end
		end("r10", store.ActionDefer, func(u *store.Update) { u.Then = "later" }),
		end("r11", store.ActionFence, func(u *store.Update) { u.Error = "unknown outcome" }),
		end("r12", store.ActionHandBack, nil),
		end("r13", store.ActionComplete, func(u *store.Update) { u.Note = "a note of its own" }),
		end("r14", store.ActionComplete, func(u *store.Update) { u.Now = at.Add(time.Millisecond) }),
		end("r15", store.ActionRetryLater, func(u *store.Update) { u.Error, u.RetryAt, u.Version = "again", at.Add(time.Hour), "v3" }),
		end("r16", store.ActionComplete, func(u *store.Update) { u.Epoch, u.Output = 2, json.RawMessage(`"second"`) }),
		end("r17", store.ActionWait, func(u *store.Update) { // never merged: it writes a wait record
			u.Wait, u.RetryAt = &store.Wait{Key: "w", Signal: "sig"}, at.Add(time.Hour)
		}),
		// Completions that admit a follow-up (a chain's next stage): held,
		end("r18", store.ActionComplete, func(u *store.Update) {
			u.Output, u.Then = json.RawMessage(`{"n":18}`), "next"
			u.Children = follow(u, "c18")
		}),
		// read back, with two runs, a context and a start time,
		end("r19", store.ActionComplete, func(u *store.Update) {
			u.Output, u.Then = json.RawMessage(`19`), "next"
			u.Children = follow(u, "c19a", "c19b")
			u.Children.Context, u.Children.NotBefore = json.RawMessage(`{"v":1}`), at.Add(time.Minute)
		}),
		// fenced (its follow-up is not admitted),
		end("r20", store.ActionComplete, func(u *store.Update) {
			u.Epoch, u.Then, u.Children = 5, "next", follow(u, "c20")
		}),
		// and never merged: a follow-up run with a drop limit is planned by
		// a read (here it is dropped, q's earlier follow-ups being active,
		// and the end refused for it).
		end("r21", store.ActionComplete, func(u *store.Update) {
			u.Then, u.Children = "next", follow(u, "c21")
			u.Children.Runs[0].Limit = 1
		}),
	}
	children := []string{"c18", "c19a", "c19b"}

	// The run that holds the merged store's writer (holdWriter) is
	// admitted in the others too, so that the follow-ups get the same
	// sequence numbers in all three.
	admitHeld := func(s *Store) {
		t.Helper()
		if _, err := s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: "held", Process: "p"}}, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	// One at a time: each end is its batch's only command, reading its run
	// back (the writer forgot the claims).
	alone, _ := open("alone.db")
	admitHeld(alone)
	alone.claimed = nil
	type answer struct {
		res store.UpdateResult
		err string
	}
	want := make([]answer, len(ends))
	for i, u := range ends {
		res, err := alone.Update(ctx, u)
		want[i] = answer{res, fmt.Sprint(err)}
	}
	// One at a time, each with its claim held: the same answers.
	fromClaims, _ := open("held.db")
	admitHeld(fromClaims)
	for i, u := range ends {
		res, err := fromClaims.Update(ctx, u)
		if got := (answer{res, fmt.Sprint(err)}); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("end %d (%s of %s) alone, its claim held:\ngot  %+v\nwant %+v", i, u.Action, u.RunID, got, want[i])
		}
	}

	// Together: queued while the writer holds another batch open. The
	// writer forgets the claims of half of the runs.
	merged, path := open("merged.db")
	held := 0
	for i := range runs {
		if i%2 == 1 {
			delete(merged.claimed, fmt.Sprintf("r%d", i))
		} else if _, ok := merged.claimed[fmt.Sprintf("r%d", i)]; ok {
			held++
		}
	}
	if held != (runs+1)/2 {
		t.Fatalf("the writer holds %d claims, want %d", held, (runs+1)/2)
	}
	release := holdWriter(t, merged, path, now)
	got := make([]answer, len(ends))
	var wg sync.WaitGroup
	for i, u := range ends {
		// Queued in order: the first of r9's two ends applies, and the
		// follow-ups get their sequence numbers in the order they did
		// alone.
		for len(merged.cmds) < i {
			time.Sleep(time.Millisecond)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := merged.Update(ctx, u)
			got[i] = answer{res, fmt.Sprint(err)}
		}()
	}
	for len(merged.cmds) < len(ends) {
		time.Sleep(time.Millisecond)
	}
	before := merged.Stats()
	release()
	wg.Wait()
	// All but r9's second (a run appears once in the statement), r17's
	// wait and r21's limited follow-up.
	if d, w := merged.Stats().MergedEnds-before.MergedEnds, int64(len(ends)-3); d != w {
		t.Errorf("%d attempt ends merged, want %d", d, w)
	}
	if n := len(merged.claimed); n != 0 {
		t.Errorf("the writer still holds %d claims after their ends", n)
	}

	for i, u := range ends {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("end %d (%s of %s):\nmerged %+v\nalone  %+v", i, u.Action, u.RunID, got[i], want[i])
		}
	}
	ids := children
	for i := range runs {
		ids = append(ids, fmt.Sprintf("r%d", i))
	}
	for _, id := range ids {
		a, err := alone.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		m, err := merged.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, m) {
			t.Errorf("%s stored:\nmerged %+v\nalone  %+v", id, m, a)
		}
		at, err := alone.Timeline(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		mt, err := merged.Timeline(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(at, mt) {
			t.Errorf("%s timeline:\nmerged %+v\nalone  %+v", id, mt, at)
		}
	}
	ac, err := alone.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := merged.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ac, mc) {
		t.Errorf("counts: merged %v, alone %v", mc, ac)
	}
	for _, id := range []string{"c20", "c21"} { // a fenced end's follow-up, a dropped one
		if _, err := merged.Run(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("follow-up %s: %v, want not found", id, err)
		}
	}
	if want[len(ends)-1].err != store.ErrNotAdmitted.Error() {
		t.Errorf("r21's end: %s, want %v", want[len(ends)-1].err, store.ErrNotAdmitted)
	}
	if string(want[0].res.Run.Output) != "{\"a\":  1,\n \"b\": \"<&>\"}" {
		t.Errorf("output stored as %q", want[0].res.Run.Output)
	}
}

// TestHeldEndFindsItsRunChanged: an attempt end of a run the writer holds
// from its claim returns nothing from SQLite, so whether it ended the run
// is told by the rows it changed. If a run is not as its claim left it
// (here its epoch is raised behind the writer's back, a change no store
// call makes without forgetting the claim), its end is refused as fenced,
// merged with others (whose ends apply) or alone, and never answered as
// applied.
func TestHeldEndFindsItsRunChanged(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	s, path := openAt(t, "held.db")
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		if _, err := s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: id, Process: "p"}}, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Claim(ctx, store.ClaimRequest{IDs: ids, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil || len(got) != len(ids) {
		t.Fatalf("claim: %v %v", got, err)
	}
	// Runs b (merged below) and d (alone) move to epoch 7 unseen.
	c := &cmd{fn: func(w *wtx) error {
		_, err := w.s.conn.ExecContext(w.ctx, "UPDATE runs SET epoch = 7 WHERE id IN ('b', 'd')")
		return err
	}, done: make(chan struct{})}
	if err := s.submit(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if k, ok := s.claimed[id]; !ok || k.epoch != 1 {
			t.Fatalf("the writer does not hold %s's claim at epoch 1: %+v", id, k)
		}
	}
	complete := func(id string) store.Update {
		return store.Update{RunID: id, Epoch: 1, Now: now.Add(time.Second), Action: store.ActionComplete, Output: json.RawMessage(`1`)}
	}
	release := holdWriter(t, s, path, now)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, id := range ids[:3] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Update(ctx, complete(id))
		}()
	}
	for len(s.cmds) < 3 {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	for i, id := range ids[:3] {
		want := error(nil)
		if id == "b" {
			want = store.ErrFenced
		}
		if !errors.Is(errs[i], want) { // errors.Is(err, nil) holds for a nil err only
			t.Errorf("merged end of %s: %v, want %v", id, errs[i], want)
		}
	}
	if _, err := s.Update(ctx, complete("d")); !errors.Is(err, store.ErrFenced) {
		t.Errorf("end of d alone: %v, want %v", err, store.ErrFenced)
	}
	for id, want := range map[string]store.Status{"a": store.StatusCompleted, "b": store.StatusRunning, "c": store.StatusCompleted, "d": store.StatusRunning} {
		if r, err := s.Run(ctx, id); err != nil || r.Status != want {
			t.Errorf("%s stored as %s (%v), want %s", id, r.Status, err, want)
		}
	}
}

// follow is the follow-up admission of u's run, as a chain's stage
// admits its next: one run of process q per id.
func follow(u *store.Update, ids ...string) *store.Admission {
	a := &store.Admission{Event: "next", Payload: u.Output, ParentID: u.RunID, CorrelationID: u.RunID, Depth: 1, Now: u.Now}
	for _, id := range ids {
		a.Runs = append(a.Runs, store.NewRun{ID: id, Process: "q"})
	}
	return a
}

// TestAttemptEndsMergedInChunks: a batch with more attempt ends than one
// merged statement takes ends them all, in several statements, each run
// with its own output, and answers each caller with its own run.
func TestAttemptEndsMergedInChunks(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	s, path := openAt(t, "chunks.db")
	n := manyMax + 5
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%d", i)
	}
	claimed(t, s, now, ids...)
	release := holdWriter(t, s, path, now)
	got := make([]store.UpdateResult, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Update(ctx, store.Update{RunID: id, Epoch: 1, Now: now.Add(time.Second), Action: store.ActionComplete,
				Output: json.RawMessage(fmt.Sprint(i))})
			if err != nil {
				t.Error(err)
			}
			got[i] = res
		}()
	}
	for len(s.cmds) < n {
		time.Sleep(time.Millisecond)
	}
	before := s.Stats()
	release()
	wg.Wait()
	if d := s.Stats().MergedEnds - before.MergedEnds; d != int64(n) {
		t.Errorf("%d attempt ends merged, want %d", d, n)
	}
	for i, id := range ids {
		if r := got[i].Run; r.ID != id || r.Status != store.StatusCompleted || string(r.Output) != fmt.Sprint(i) {
			t.Errorf("end of %s answered %+v", id, r)
		}
		if r, err := s.Run(ctx, id); err != nil || r.Status != store.StatusCompleted || string(r.Output) != fmt.Sprint(i) {
			t.Errorf("%s stored as %+v, %v", id, r, err)
		}
	}
}

// BenchmarkAttemptEnds measures the writer's cost of ending attempts
// (completions with a small output) in batches of 64, as one statement
// for the batch ("merged") and as one statement each ("alone"): the time
// per end, BEGIN and COMMIT included.
func BenchmarkAttemptEnds(b *testing.B) {
	for _, merge := range []bool{true, false} {
		name := map[bool]string{true: "merged", false: "alone"}[merge]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(filepath.Join(b.TempDir(), "ends.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			now := time.Now()
			const batch = 64
			ids := make([]string, 0, b.N)
			for i := 0; i < b.N; i += 500 {
				a := store.Admission{Event: "e", Payload: json.RawMessage(`{"i":1}`), Now: now}
				for j := i; j < min(i+500, b.N); j++ {
					id := fmt.Sprintf("%08d-0000-7000-8000-%012d", j, j)
					a.Runs = append(a.Runs, store.NewRun{ID: id, Process: "p"})
					ids = append(ids, id)
				}
				if _, err := s.Admit(ctx, a); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Claim(ctx, store.ClaimRequest{IDs: ids[i:], Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				var cmds []*cmd
				for _, id := range ids[i:min(i+batch, b.N)] {
					u := store.Update{RunID: id, Epoch: 1, Now: now, Action: store.ActionComplete, Output: json.RawMessage(`{"ok":true}`)}
					c := &cmd{fn: func(w *wtx) error { _, err := w.update(&u); return err }, done: make(chan struct{})}
					if f := (&finishCmd{}); merge && f.set(&u) {
						c.fin = f
					}
					cmds = append(cmds, c)
				}
				if err := s.tryBatch(cmds); err != nil {
					b.Fatal(err)
				}
				for _, c := range cmds {
					if c.err != nil {
						b.Fatal(c.err)
					}
				}
			}
		})
	}
}

// TestQueuedEffectEnd: QueueFinishEffect returns while the writer is
// still busy with an earlier batch (the caller does not wait for the
// effect's end), and a write its caller makes afterwards commits with it
// or after it: once the attempt's end, queued next, is answered, the
// effect's end is there for every reader, and its wait reports success.
func TestQueuedEffectEnd(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	s, path := openAt(t, "queued.db")
	claimed(t, s, now, "r")
	if err := s.StartEffect(ctx, "r", 1, "k", now); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s, path, now)
	queued := make(chan func() error, 1)
	go func() {
		queued <- s.QueueFinishEffect(ctx, "r", 1, "k", store.EffectCompleted, json.RawMessage(`"ok"`), "", now)
	}()
	var wait func() error
	select {
	case wait = <-queued:
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("QueueFinishEffect waited for the writer")
	}
	ended := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, store.Update{RunID: "r", Epoch: 1, Now: now, Action: store.ActionComplete, Output: json.RawMessage(`1`)})
		ended <- err
	}()
	for len(s.cmds) < 2 {
		time.Sleep(time.Millisecond)
	}
	release()
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	effs, err := s.Effects(ctx, "r")
	if err != nil || len(effs) != 1 || effs[0].Status != store.EffectCompleted || string(effs[0].Output) != `"ok"` {
		t.Fatalf("effects once the attempt's end was answered: %+v, %v", effs, err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	// A queued end of an effect this epoch no longer owns is refused.
	if err := s.QueueFinishEffect(ctx, "r", 9, "k", store.EffectCompleted, nil, "", now)(); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a stale epoch's end: %v, want ErrFenced", err)
	}
}

// openAt opens a store on a new file of the test's directory, closed when
// the test ends, and returns it with the file's absolute path (which
// holdWriter needs).
func openAt(t testing.TB, name string) (*Store, string) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// claimed admits a run of process p for each id, one admission each, and
// claims them all at now: each is running at epoch 1.
func claimed(t testing.TB, s *Store, now time.Time, ids ...string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		if _, err := s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: id, Process: "p"}}, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Claim(ctx, store.ClaimRequest{IDs: ids, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil || len(got) != len(ids) {
		t.Fatalf("claim: %d of %d runs, %v", len(got), len(ids), err)
	}
}
