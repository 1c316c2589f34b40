package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// CheckTransitions drives every action of the transition table
// (store.Transitions) from every status through st, for each status the
// action may lead to, with the epoch right and stale, a reclaim of an
// expired and of a live lease, and follow-ups that are admitted, dropped
// with a fallback and dropped without one; CheckUpdate compares each
// answer with store.Apply. Runs are prepared through st itself (admitted,
// claimed, failed once, claimed again with one effect left started and
// one completed), so every field a transition may keep or clear holds a
// value. A store's tests call it on a fresh store.
func CheckTransitions(t *testing.T, st store.Store) {
	ctx := context.Background()
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// One active run of the capped process: a follow-up for it is dropped.
	if _, err := st.Admit(ctx, store.Admission{Event: "busy", Runs: []store.NewRun{{ID: tableID(), Process: "capped"}}, Now: base}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range store.Transitions {
		rule := &store.Transitions[i]
		applied := 0
		for _, from := range store.Statuses {
			for _, to := range rule.To {
				for _, v := range tableVariants(rule, from) {
					r := runInStatus(t, st, from, base)
					if _, err := CheckUpdate(t, st, tableUpdate(rule, to, v, &r, base), false); err == nil {
						applied++
					}
					n++
				}
			}
		}
		// Not vacuous: the usual update applies from every status the rule
		// names, to every status it leads to.
		if applied < len(rule.From)*len(rule.To) {
			t.Errorf("%s applied %d times, want at least %d", rule.Action, applied, len(rule.From)*len(rule.To))
		}
	}
	t.Logf("%d transitions checked against the table", n)
}

// tableVariants are the ways an action is tried from a status: the usual one
// (""), a stale epoch and a live lease for guarded actions on a running
// run, and follow-ups for the actions that take one.
func tableVariants(rule *store.Rule, from store.Status) []string {
	vs := []string{""}
	if rule.Guard != store.GuardStatus && from == store.StatusRunning {
		vs = append(vs, "stale")
	}
	if rule.Guard == store.GuardReclaim && from == store.StatusRunning {
		vs = append(vs, "live")
	}
	if rule.FollowUp {
		vs = append(vs, "child", "dropped")
		if rule.Fallback != "" {
			vs = append(vs, "required")
		}
	}
	return vs
}

// runInStatus returns a run brought to status to through the store:
// admitted, claimed with two effects (one completed), failed with a retry
// time (idle), claimed again leaving one effect started (running), then
// moved to status to by the first action of the table that leads there
// from running (or, failing that, from idle).
func runInStatus(t *testing.T, st store.Store, to store.Status, base time.Time) store.Run {
	t.Helper()
	ctx := context.Background()
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	res, err := st.Admit(ctx, store.Admission{Event: "ev", Payload: json.RawMessage(`{"n":1}`), Runs: []store.NewRun{{ID: tableID(), Process: "p"}}, Now: base})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Admitted[0].ID
	claim := func(now time.Time) store.Run {
		rs, err := st.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(30 * time.Second)})
		if err != nil || len(rs) != 1 {
			t.Fatalf("prepare %s: claim: %v (%d runs)", to, err, len(rs))
		}
		return rs[0]
	}
	must := func(u store.Update) store.Run {
		res, err := st.Update(ctx, u)
		if err != nil {
			t.Fatalf("prepare %s: %s: %v", to, u.Action, err)
		}
		return res.Run
	}
	r := claim(at(1))
	for _, k := range []string{"started", "done"} {
		if err := st.StartEffect(ctx, id, r.Epoch, k, at(1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.FinishEffect(ctx, id, r.Epoch, "done", store.EffectCompleted, json.RawMessage(`"d"`), "", at(1)); err != nil {
		t.Fatal(err)
	}
	r = must(store.Update{RunID: id, Action: store.ActionRetryLater, Epoch: r.Epoch, Now: at(2), Error: "e1", ErrorCode: "E1", RetryAt: at(3), Version: "v1"})
	if to == store.StatusIdle {
		return r
	}
	rule := ruleTo(to, store.StatusRunning)
	if rule == nil {
		if rule = ruleTo(to, store.StatusIdle); rule == nil {
			t.Fatalf("prepare: no action leads to %s", to)
		}
		u := tableUpdate(rule, to, "", &r, base)
		u.Now = at(3)
		return must(u)
	}
	r = claim(at(4))
	if err := st.StartEffect(ctx, id, r.Epoch, "started", at(4)); err != nil {
		t.Fatal(err)
	}
	if to == store.StatusRunning {
		if r, err = st.Run(ctx, id); err != nil {
			t.Fatal(err)
		}
		return r
	}
	u := tableUpdate(rule, to, "", &r, base)
	u.Now = at(5)
	return must(u)
}

// ruleTo is the first rule of the table that leads from status from to
// status to without a reclaim's lease condition, or nil.
func ruleTo(to, from store.Status) *store.Rule {
	if to == store.StatusRunning {
		return &store.Rule{} // the claim
	}
	for i := range store.Transitions {
		r := &store.Transitions[i]
		if r.Guard != store.GuardReclaim && slices.Contains(r.From, from) && slices.Contains(r.To, to) {
			return r
		}
	}
	return nil
}

// tableUpdate is the update of the variant v of rule's action leading to to,
// on run r (see tableVariants).
func tableUpdate(rule *store.Rule, to store.Status, v string, r *store.Run, base time.Time) store.Update {
	u := store.Update{RunID: r.ID, Action: rule.Action, To: to, Now: base.Add(40 * time.Second),
		Output: json.RawMessage(`{"out":2}`), Then: "next", Error: "boom", ErrorCode: "X",
		RetryAt: base.Add(50 * time.Second), Version: "v9"}
	if rule.Guard != store.GuardStatus {
		u.Epoch, u.Reclaim = max(r.Epoch, 1), rule.Guard == store.GuardReclaim
	}
	if rule.Effects == store.EffectsComplete {
		u.CompleteEffect = &store.EffectDone{Key: "started", Output: json.RawMessage(`7`)}
	}
	if rule.Effects == store.EffectsWait {
		u.Wait = &store.Wait{Key: "wait", Signal: "sig"}
	}
	switch v {
	case "stale":
		u.Epoch--
	case "live": // the lease, renewed at 4s for 30s, holds
		u.Now = base.Add(10 * time.Second)
	case "child", "dropped", "required":
		nr := store.NewRun{ID: tableID(), Process: "c"}
		if v != "child" {
			nr = store.NewRun{ID: tableID(), Process: "capped", Limit: 1}
		}
		u.Children = &store.Admission{Event: "next", Payload: u.Output, Runs: []store.NewRun{nr},
			ParentID: r.ID, CorrelationID: r.CorrelationID, Depth: r.Depth + 1, Now: u.Now}
		if v == "dropped" {
			u.NoChildren = &store.Outcome{Error: "follow-up next admitted no run", ErrorCode: "NOT_ADMITTED"}
		}
	}
	return u
}

// CheckUpdate applies u through st and compares what the store did with
// the transition table: the answer (error class, or the run after the
// update as store.Apply computes it from the run before), the stored run,
// the timeline entry appended, the status counts, the effect records and
// the follow-up runs admitted. A refused update must change nothing.
// ownerGone is what the store knows of the lease owner (store.Facts); the
// follow-up's admissions are taken from the store's answer. It returns the
// store's answer.
func CheckUpdate(t testing.TB, st store.Store, u store.Update, ownerGone bool) (store.UpdateResult, error) {
	t.Helper()
	ctx := context.Background()
	before, err := st.Run(ctx, u.RunID)
	if errors.Is(err, store.ErrNotFound) {
		res, err := st.Update(ctx, u)
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("update of unknown run %s: %v, want ErrNotFound", u.RunID, err)
		}
		return res, err
	}
	if err != nil {
		t.Fatal(err)
	}
	tl0, _ := st.Timeline(ctx, u.RunID)
	effs0, _ := st.Effects(ctx, u.RunID)
	counts0, _ := st.Counts(ctx)
	res, err := st.Update(ctx, u)
	where := fmt.Sprintf("%s --%s--> %s", before.Status, u.Action, u.To)
	f := store.Facts{OwnerGone: ownerGone, Admitted: len(res.Children.Admitted)}
	want, wantErr := store.Apply(before, u, f)
	if errClass(err) != errClass(wantErr) {
		t.Errorf("%s: store says %v, the table %v", where, err, wantErr)
	}
	after, _ := st.Run(ctx, u.RunID)
	tl, _ := st.Timeline(ctx, u.RunID)
	effs, _ := st.Effects(ctx, u.RunID)
	counts, _ := st.Counts(ctx)
	if err != nil || wantErr != nil {
		for _, d := range diffRuns(after, before) {
			t.Errorf("%s: refused, yet the stored run changed: %s", where, d)
		}
		if len(tl) != len(tl0) || !reflect.DeepEqual(effectsOf(effs), effectsOf(effs0)) || !reflect.DeepEqual(counts, counts0) {
			t.Errorf("%s: refused, yet the timeline, effects or counts changed", where)
		}
		return res, err
	}
	noData := want
	noData.Payload, noData.Context = nil, nil
	for _, d := range diffRuns(res.Run, noData) {
		t.Errorf("%s: answered run differs from the table: %s", where, d)
	}
	for _, d := range diffRuns(after, want) {
		t.Errorf("%s: stored run differs from the table: %s", where, d)
	}
	rule, _ := u.Rule()
	o, _, _ := rule.Outcome(&u, f.Admitted)
	if len(tl) != len(tl0)+1 {
		t.Errorf("%s: %d timeline entries, want %d", where, len(tl), len(tl0)+1)
	} else if e := tl[len(tl)-1]; e.Status != want.Status || e.Attempt != want.Attempts || e.Error != want.Error ||
		e.Code != want.ErrorCode || e.Note != o.Note || !e.At.Equal(u.Now) {
		t.Errorf("%s: timeline entry %+v, want status %s, attempt %d, error %q (%s), note %q at %s",
			where, e, want.Status, want.Attempts, want.Error, want.ErrorCode, o.Note, u.Now)
	}
	wantCounts := cloneCounts(counts0)
	wantCounts[before.Status]--
	wantCounts[want.Status]++
	wantCounts[store.StatusIdle] += int64(f.Admitted)
	if !reflect.DeepEqual(counts, wantCounts) {
		t.Errorf("%s: counts %v, want %v", where, counts, wantCounts)
	}
	wantEffs := effectsOf(effs0)
	switch rule.Effects {
	case store.EffectsClearStarted:
		for k, s := range wantEffs {
			if s[0] == string(store.EffectStarted) || s[0] == string(store.EffectWaiting) {
				delete(wantEffs, k)
			}
		}
	case store.EffectsComplete:
		wantEffs[u.CompleteEffect.Key] = [2]string{string(store.EffectCompleted), string(u.CompleteEffect.Output)}
	case store.EffectsWait: // no signal is kept in these checks
		wantEffs[u.Wait.Key] = [2]string{string(store.EffectWaiting), ""}
	}
	if got := effectsOf(effs); !reflect.DeepEqual(got, wantEffs) {
		t.Errorf("%s: effects %v, want %v", where, got, wantEffs)
	}
	for _, c := range res.Children.Admitted {
		if c.ParentID != u.RunID || c.Status != store.StatusIdle {
			t.Errorf("%s: follow-up %+v", where, c)
		}
	}
	return res, err
}

// tableID returns a run id no earlier call in this process returned.
func tableID() string { return fmt.Sprintf("table-%d", tableSeq.Add(1)) }

var tableSeq atomic.Int64

func cloneCounts(m map[store.Status]int64) map[store.Status]int64 {
	out := make(map[store.Status]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// effectsOf maps an effect key to its status and output.
func effectsOf(es []store.Effect) map[string][2]string {
	out := map[string][2]string{}
	for _, e := range es {
		out[e.Key] = [2]string{string(e.Status), string(e.Output)}
	}
	return out
}

// errClass names the kind of a store error, for comparing two stores'
// (or a store's and the table's) refusals.
func errClass(err error) string {
	var se *store.StatusError
	switch {
	case err == nil:
		return "applied"
	case errors.As(err, &se):
		return "status " + string(se.Status)
	}
	for _, s := range []error{store.ErrFenced, store.ErrNotAdmitted, store.ErrInvalidUpdate, store.ErrNotFound} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "other: " + err.Error()
}

// diffRuns lists the fields in which two runs differ: times compared as
// instants, JSON as bytes (empty and nil alike).
func diffRuns(got, want store.Run) []string {
	var out []string
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range g.NumField() {
		a, b := g.Field(i).Interface(), w.Field(i).Interface()
		same := false
		switch x := a.(type) {
		case time.Time:
			same = x.Equal(b.(time.Time))
		case json.RawMessage:
			same = bytes.Equal(x, b.(json.RawMessage))
		default:
			same = a == b
		}
		if !same {
			out = append(out, fmt.Sprintf("%s = %v, want %v", g.Type().Field(i).Name, show(a), show(b)))
		}
	}
	return out
}

func show(v any) any {
	if b, ok := v.(json.RawMessage); ok {
		return string(b)
	}
	return v
}
