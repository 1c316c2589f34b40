package yella

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/yella-go/yella/store"
)

// MaxChildren bounds the payloads of one Children call.
const MaxChildren = 10_000

// joinPoll bounds how long a Join waits between two looks at its children
// when no child's end woke it: a child ended by an operator, by the
// reclaim of a dead attempt, on another node, or by an engine that crashed
// before it could wake the parent, is seen within it.
const joinPoll = 10 * time.Second

// Children starts event's runs (one per listening process) once per
// payload, as children of this run in its chain (one level deeper, with a
// copy of its context), and returns their ids in payload order. The runs
// are admitted in one transaction, once: later attempts of this run return
// the same ids (the call is recorded under key, as an effect is) and never
// admit them again, even after a crash in the middle. Children run on
// their own, with their own retry policy; Join waits for them.
func Children[K EffectKey](c *Ctx, key K, event string, payloads []any) ([]string, error) {
	a, e := c.a, c.a.e
	k := encodeKey(key)
	if len(payloads) == 0 || len(payloads) > MaxChildren {
		return nil, &Error{Code: CodeInvalidPayload, Op: "children", Msg: fmt.Sprintf("%d payloads: give 1 to %d", len(payloads), MaxChildren)}
	}
	if a.run.Depth+1 > e.cfg.MaxChainDepth {
		return nil, &Error{Code: CodeChainDepthExceeded, Op: "children", Msg: fmt.Sprintf("children of %s would be at depth %d (limit %d)", event, a.run.Depth+1, e.cfg.MaxChainDepth)}
	}
	targets := e.listeners(event)
	if len(targets) == 0 {
		return nil, &Error{Code: CodeNotAdmitted, Op: "children", Msg: "no process listens to " + event}
	}
	raws := make([]json.RawMessage, len(payloads))
	for i, p := range payloads {
		raw, err := e.encodePayload(p)
		if err != nil {
			err.(*Error).Op = "children"
			return nil, err
		}
		if verr := validatePayload("child "+event, targets, raw); verr != nil {
			verr.Op = "children"
			return nil, verr
		}
		raws[i] = raw
	}
	a.mu.Lock()
	vars, _ := json.Marshal(a.vars)
	a.mu.Unlock()
	return Effect(c, key, func(ctx context.Context) ([]string, error) {
		now := e.clock.Now()
		as := make([]store.Admission, len(raws))
		var ids []string
		for i, raw := range raws {
			adm := store.Admission{Event: event, Payload: raw, ParentID: a.run.ID, CorrelationID: a.run.CorrelationID,
				Depth: a.run.Depth + 1, Context: vars, Now: now}
			adm.Runs = newRuns(targets, &adm, nil)
			for j := range adm.Runs {
				// Derived from the parent, the call and the position: an
				// attempt that admitted them and crashed before recording
				// it finds them here.
				adm.Runs[j].ID = childID(a.run.ID, k, i, adm.Runs[j].Process)
				ids = append(ids, adm.Runs[j].ID)
			}
			as[i] = adm
		}
		// An attempt that admitted them and did not record it (a crash
		// in between): its admission stands, with what it dropped. One
		// read for all of them.
		found, err := e.store.RunsByID(ctx, ids)
		if err != nil {
			return nil, err
		}
		if len(found) > 0 {
			have := make(map[string]bool, len(found))
			for _, r := range found {
				have[r.ID] = true
			}
			var existing []string
			for _, id := range ids {
				if have[id] {
					existing = append(existing, id)
				}
			}
			return existing, nil
		}
		res, err := e.store.AdmitBatch(ctx, as)
		if err != nil {
			return nil, err
		}
		admitted := ids[:0:0]
		for i := range res {
			e.admitted(&as[i], res[i], false)
			for _, r := range res[i].Admitted {
				admitted = append(admitted, r.ID)
			}
		}
		return admitted, nil
	}, Idempotent())
}

// childID is the id of a child run: a UUID derived from its parent, the
// Children call's key, its payload's position and its process.
func childID(parent, key string, i int, process string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("yella:child\x00"+parent+"\x00"+key+"\x00"+strconv.Itoa(i)+"\x00"+process)).String()
}

// JoinResult is how one child run ended, as Join returns it.
type JoinResult struct {
	RunID     string
	Status    Status // final: completed, deferred, errored, dead-letter, fenced or cancelled
	Output    json.RawMessage
	Error     string
	ErrorCode Code
}

// OK reports whether the child succeeded (completed or deferred).
func (r JoinResult) OK() bool { return r.Status == StatusCompleted || r.Status == StatusDeferred }

// Err is the child's failure as an error, or nil when it succeeded.
func (r JoinResult) Err() error {
	if r.OK() {
		return nil
	}
	return &Error{Code: r.ErrorCode, Op: "join", Msg: "child " + r.RunID + " is " + string(r.Status) + ": " + r.Error}
}

// Decode unmarshals the child's output into v.
func (r JoinResult) Decode(v any) error { return json.Unmarshal(nullIfEmpty(r.Output), v) }

// Join waits until at least k of the runs ids (all of them when k <= 0 or
// k > len(ids)) are final, and returns how each of those ended, in the
// order of ids (the others are left out). A child ends final after its own
// retries: a child that failed and then succeeded counts as succeeded; one
// that failed for good is reported with its error, for the handler to
// handle. Until then it returns ErrWaiting: the run waits, holding no
// slot, and a child's end wakes it (else it looks again every few
// seconds). The outcome is recorded under key (apart from the effects and
// Children calls of the same key), so later attempts get the same answer.
func Join[K EffectKey](c *Ctx, key K, ids []string, k int) ([]JoinResult, error) {
	a, e := c.a, c.a.e
	if k <= 0 || k > len(ids) {
		k = len(ids)
	}
	jk := "join:" + encodeKey(key) // apart from effects': a Children call may share the key
	a.mu.Lock()
	rec, ok := a.effects[jk]
	a.mu.Unlock()
	if ok && rec.Status == store.EffectCompleted {
		var out []JoinResult
		if err := json.Unmarshal(rec.Output, &out); err != nil {
			return nil, &Error{Code: CodeInvalidPayload, Op: "join", Msg: "stored outcome of join " + jk + " does not decode", Err: err}
		}
		ev := a.event(EffectReplayed)
		ev.EffectKey = jk
		a.e.publish(ev)
		return out, nil
	}
	// Past waits of this join are over: its children are looked at once,
	// now (they only ever end).
	n := 0
	for ; ; n++ {
		wk := joinWaitKey(jk, n)
		a.mu.Lock()
		_, seen := a.effects[wk]
		a.mu.Unlock()
		if !seen {
			break
		}
		if _, err := a.waitStep("join", wk, joinSignal(a.run.ID), time.Time{}, timeoutOutput); err != nil {
			return nil, err
		}
	}
	done, err := e.joinDone(c, ids)
	if err != nil {
		return nil, &Error{Code: CodeUnavailable, Op: "join", Err: err}
	}
	if done >= k {
		out, _, err := e.joinState(c, ids)
		if err != nil {
			return nil, &Error{Code: CodeUnavailable, Op: "join", Err: err}
		}
		enc, _ := json.Marshal(out)
		if _, err := a.beginEffect(jk, true); err != nil {
			return nil, err
		}
		if err := a.finishEffect(jk, store.EffectCompleted, enc, "", e.clock.Now()); err != nil {
			return nil, err
		}
		return out, nil
	}
	_, err = a.waitStep("join", joinWaitKey(jk, n), joinSignal(a.run.ID), e.clock.Now().Add(joinPoll), timeoutOutput)
	if errors.Is(err, ErrWaiting) {
		a.mu.Lock()
		a.wait.join = &joinWatch{ids: ids, done: done}
		a.mu.Unlock()
	}
	return nil, err
}

func joinWaitKey(jk string, n int) string { return jk + "/wait/" + strconv.Itoa(n) }

// joinSignal is the signal key a run waiting in Join waits for: its
// children's ends send it.
func joinSignal(runID string) string { return "yella:join:" + runID }

// joinDone counts the final runs among ids without reading them: a join
// looks at its children again at each child's end, and a read of every
// child, outputs included, each time would cost a wide join the square of
// its children. An unknown id is an error (ErrNotFound).
func (e *Engine) joinDone(ctx context.Context, ids []string) (int, error) {
	exist, final, err := e.store.CountEnded(ctx, ids)
	if err != nil {
		return 0, err
	}
	if exist < len(slices.Compact(slices.Sorted(slices.Values(ids)))) {
		if _, _, err := e.joinState(ctx, ids); err != nil {
			return 0, err // it names the unknown run
		}
		return 0, fmt.Errorf("join: %d of %d runs: %w", exist, len(ids), store.ErrNotFound)
	}
	return final, nil
}

// joinState reads the runs ids, all in one read: how the final ones
// ended, in order, and how many are final. An unknown id is an error
// (ErrNotFound).
func (e *Engine) joinState(ctx context.Context, ids []string) ([]JoinResult, int, error) {
	runs, err := e.store.RunsByID(ctx, ids)
	if err != nil {
		return nil, 0, err
	}
	byID := make(map[string]*store.Run, len(runs))
	for i := range runs {
		byID[runs[i].ID] = &runs[i]
	}
	var out []JoinResult
	for _, id := range ids {
		r, ok := byID[id]
		if !ok {
			return nil, 0, fmt.Errorf("join: run %s: %w", id, store.ErrNotFound)
		}
		if r.Status.Final() {
			out = append(out, JoinResult{RunID: r.ID, Status: Status(r.Status), Output: r.Output, Error: r.Error, ErrorCode: Code(r.ErrorCode)})
		}
	}
	return out, len(out), nil
}

// joinWatch is what a run waiting in Join waits for: done of ids were
// final when it looked.
type joinWatch struct {
	ids  []string
	done int
}

// joins are the runs of this engine waiting in Join: a child's end
// signals its parent when the parent is one of them. An engine that
// restarted knows none until they wait again (joinPoll bounds the delay).
type joins struct {
	n  atomic.Int64 // len(m): settle looks only when some run waits
	mu sync.Mutex
	m  map[string]bool
}

func (j *joins) set(id string, on bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.m == nil {
		j.m = map[string]bool{}
	}
	if on {
		j.m[id] = true
	} else {
		delete(j.m, id)
	}
	j.n.Store(int64(len(j.m)))
}

func (j *joins) has(id string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.m[id]
}

// joinSettled is settle's part for Join: a parent that began to wait is
// known, and looked at once more (a child that ended between its look and
// its wait's commit found it not yet waiting); a child that ended wakes
// its waiting parent.
func (e *Engine) joinSettled(r *store.Run, w *joinWatch) {
	if w != nil && r.Status == store.StatusWaiting {
		e.joins.set(r.ID, true)
		if done, err := e.joinDone(e.io, w.ids); err == nil && done > w.done {
			e.wakeJoin(r.ID)
		}
		return
	}
	if r.Status != store.StatusWaiting && e.joins.has(r.ID) {
		e.joins.set(r.ID, false) // it runs, or ended
	}
	if r.ParentID != "" && r.Status.Final() && e.joins.has(r.ParentID) {
		e.wakeJoin(r.ParentID)
	}
}

// wakeJoin ends the join wait of run parent, if it still waits.
func (e *Engine) wakeJoin(parent string) {
	res, err := e.store.Signal(e.io, store.SignalRequest{Key: joinSignal(parent), RunID: parent, Payload: json.RawMessage(`{}`), Now: e.clock.Now()})
	if err != nil || res.Woken == nil {
		return // not waiting (any more): it looks at its children when it runs
	}
	e.joins.set(parent, false)
	e.publish(with(runEvent(res.Woken), RunSignalled))
	e.requeue(res.Woken)
}
