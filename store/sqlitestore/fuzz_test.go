package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
	"github.com/yella-go/yella/store/storetest"
)

// FuzzRunsDifferential compares run listings of the SQLite store with the
// in-memory reference, on the same history (chains, failures, several
// processes), for any filter: the same runs in the same order, or the same
// refusal. Filter values reach SQL only as bound arguments, so quotes,
// wildcards and comment markers in them match nothing but themselves.
func FuzzRunsDifferential(f *testing.F) {
	f.Add("a", "", "", "", -1, int64(0), 10, false, 0)
	f.Add("", "next", "completed", "", 2, int64(0), 0, false, 1)
	f.Add("b", "go", "errored", "errored", -1, int64(12), 3, true, 0)
	f.Add("' OR '1'='1", "%", "", "", -1, int64(-4), 5000, false, 1)
	f.Add("", "", "", "completed", 7, int64(40), 2, true, 0)
	f.Add("a\x00", "go;--", "idle", "bogus", 100, int64(1<<62), -3, false, 9)
	engines := map[string]*yella.Engine{}
	for _, kind := range []string{"memory", "sqlite"} {
		var st store.Store = memstore.New()
		if kind == "sqlite" {
			s, err := sqlitestore.Open(filepath.Join(f.TempDir(), "fuzz.db"), sqlitestore.Options{})
			if err != nil {
				f.Fatal(err)
			}
			f.Cleanup(func() { s.Close() })
			st = s
		}
		// One at a time, so both stores see the same order of admissions.
		eng, err := yella.New(yella.Config{Store: st, Concurrency: 1})
		if err != nil {
			f.Fatal(err)
		}
		eng.Register(yella.Process{Name: "a", On: "go", Run: func(c *yella.Ctx) yella.Result {
			var n int
			c.Decode(&n)
			if n%5 == 4 {
				return c.Fail(errors.New("no"))
			}
			return c.OK(n, yella.Then("next"))
		}})
		eng.Register(yella.Process{Name: "b", On: "go", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
		eng.Register(yella.Process{Name: "c", On: "next", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
		ctx := context.Background()
		if err := eng.Start(ctx); err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { eng.Stop(ctx) })
		for i := range 20 {
			if _, err := eng.EmitAndWait(ctx, "go", i); err != nil {
				f.Fatal(err)
			}
			if err := eng.Drain(ctx); err != nil {
				f.Fatal(err)
			}
		}
		engines[kind] = eng
	}
	// rootOf maps a root's position to its correlation id in each store.
	roots := map[string][]string{}
	for kind, eng := range engines {
		page, err := eng.Runs(context.Background(), yella.RunQuery{RootOnly: true, Order: yella.OldestFirst, Limit: yella.MaxPageSize})
		if err != nil {
			f.Fatal(err)
		}
		for _, r := range page.Runs {
			roots[kind] = append(roots[kind], r.CorrelationID)
		}
	}
	f.Fuzz(func(t *testing.T, process, event, status, state string, corr int, after int64, limit int, rootOnly bool, order int) {
		type answer struct {
			seqs []string
			code yella.Code
		}
		got := map[string]answer{}
		for kind, eng := range engines {
			q := yella.RunQuery{Process: process, Event: event, State: yella.State(state), RootOnly: rootOnly, Order: yella.Order(order), Limit: limit}
			if status != "" {
				q.Status = []yella.Status{yella.Status(status)}
			}
			if corr >= 0 && corr < len(roots[kind]) {
				q.CorrelationID = roots[kind][corr]
			} else if corr >= 0 {
				q.CorrelationID = fmt.Sprint(corr)
			}
			if after != 0 {
				q.Cursor = fmt.Sprintf("s%d", after)
			}
			page, err := eng.Runs(context.Background(), q)
			var a answer
			a.code = yella.CodeOf(err)
			if err != nil && a.code != yella.CodeInvalidQuery {
				t.Fatalf("%s: %+v: %v", kind, q, err)
			}
			for _, r := range page.Runs {
				payload, _ := json.Marshal(r.Payload)
				a.seqs = append(a.seqs, fmt.Sprintf("%d %s %s %s %d %s", r.Seq, r.Process, r.Event, r.Status, r.Depth, payload))
			}
			got[kind] = a
		}
		m, s := got["memory"], got["sqlite"]
		if m.code != s.code || !slices.Equal(m.seqs, s.seqs) {
			t.Fatalf("memory and sqlite differ:\nmemory (%s): %v\nsqlite (%s): %v", m.code, m.seqs, s.code, s.seqs)
		}
	})
}

// FuzzUpdates drives runs through any sequence of claims, effect starts,
// signals and updates of every action, with any target, epoch, time and
// follow-up, and compares every answer of the SQLite store with the
// transition table (store.Apply, through storetest.CheckUpdate): the same
// refusal, or the same run, timeline entry, counts, effects and
// follow-ups. Signals are never kept here, so every wait waits (as
// CheckUpdate expects); the counts kept in memory must match the
// database's after each input.
func FuzzUpdates(f *testing.F) {
	f.Add([]byte{0, 0, 9, 0, 0, 0})
	f.Add([]byte{0, 1, 2, 3, 0, 1, 10, 1, 0, 2})
	f.Add([]byte{0, 0, 1, 0, 7, 0, 12, 0, 0, 0, 13, 0, 3, 1, 0, 2, 11, 2})
	f.Add([]byte{0, 0, 14, 0, 5, 0, 14, 0, 0, 0, 4, 4, 10, 1, 255, 7})
	// Wait, signalled; wait with a deadline, claimed past it; end-wait
	// refused while running; wait, cancelled.
	f.Add([]byte{0, 0, 8, 0, 3, 0, 0, 0, 8, 3, 0, 3, 9, 0, 8, 0, 10, 0})
	st, err := sqlitestore.Open(filepath.Join(f.TempDir(), "fuzz.db"), sqlitestore.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if _, err := st.Admit(ctx, store.Admission{Event: "busy", Runs: []store.NewRun{{ID: newID(), Process: "capped"}}, Now: start}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 300 {
			return
		}
		now := start
		var ids []string
		for range 3 {
			res, err := st.Admit(ctx, store.Admission{Event: "e", Payload: []byte(`1`), Runs: []store.NewRun{{ID: newID(), Process: "p"}}, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Admitted[0].ID)
		}
		for len(prog) >= 2 {
			op, arg := int(prog[0]), int(prog[1])
			prog = prog[2:]
			id := ids[arg%len(ids)]
			now = now.Add(time.Duration(arg%17) * time.Second)
			cur, err := st.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case op%16 == 0:
				st.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(10 * time.Second)})
				continue
			case op%16 == 1:
				st.StartEffect(ctx, id, cur.Epoch, fmt.Sprint("k", arg%2), now)
				continue
			case op%16 == 2:
				st.FinishEffect(ctx, id, cur.Epoch, fmt.Sprint("k", arg%2), store.EffectCompleted, []byte(`2`), "", now)
				continue
			case op%16 == 3:
				req := store.SignalRequest{Key: fmt.Sprint("s", arg%2), Payload: []byte(`4`), Now: now}
				if op&0x10 != 0 {
					req.RunID = id
				}
				res, err := st.Signal(ctx, req)
				var se *store.StatusError
				switch {
				case err != nil && !errors.As(err, &se):
					t.Fatalf("signal %+v: %v", req, err)
				case res.Kept:
					t.Fatalf("signal %+v kept without KeepUntil", req)
				case res.Woken != nil && (res.Woken.Status != store.StatusIdle || res.Woken.WaitKey != ""):
					t.Fatalf("signal %+v woke %+v", req, res.Woken)
				}
				continue
			}
			rule := &store.Transitions[op%len(store.Transitions)]
			u := store.Update{RunID: id, Now: now, Action: rule.Action, To: rule.To[arg%len(rule.To)],
				Output: []byte(`{"o":1}`), Then: "next", Error: "boom", ErrorCode: "X", RetryAt: now.Add(time.Second), Version: "v"}
			if rule.Guard != store.GuardStatus {
				u.Epoch, u.Reclaim = cur.Epoch-int64(op>>7), rule.Guard == store.GuardReclaim
			}
			if rule.Effects == store.EffectsComplete {
				u.CompleteEffect = &store.EffectDone{Key: "k0", Output: []byte(`3`)}
			}
			if rule.Effects == store.EffectsWait {
				u.Wait = &store.Wait{Key: fmt.Sprint("w", arg%3), Signal: []string{"s0", "s1", ""}[arg%3]}
			}
			if rule.FollowUp && op&0x20 != 0 {
				nr := store.NewRun{ID: newID(), Process: "c"}
				if op&0x40 != 0 {
					nr = store.NewRun{ID: newID(), Process: "capped", Limit: 1}
				}
				u.Children = &store.Admission{Event: "next", Runs: []store.NewRun{nr}, ParentID: id, CorrelationID: cur.CorrelationID, Depth: 1, Now: now}
				if arg&1 != 0 {
					u.NoChildren = &store.Outcome{Error: "dropped", ErrorCode: "NOT_ADMITTED"}
				}
			}
			storetest.CheckUpdate(t, st, u, false)
		}
		counts, err := st.Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range store.Statuses {
			n, err := st.CountRuns(ctx, store.RunFilter{Statuses: []store.Status{s}, Limit: 1})
			if err != nil || n != counts[s] {
				t.Fatalf("%s: Counts says %d, the database %d (%v)", s, counts[s], n, err)
			}
		}
	})
}
