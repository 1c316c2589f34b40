package pgstore

import (
	"bytes"
	"slices"
	"sync"
	"time"

	"github.com/yella-go/yella/store"
)

// heldMax bounds the runs a store remembers from its claims: past it the
// record starts again empty. A record is only a shortcut (an end without
// one takes the wide statement), so forgetting costs speed, never
// correctness; the bound keeps the runs this node claimed but never
// ended (taken over by another node, or ended by an operator) from
// piling up.
const heldMax = 1 << 16

// heldRun is what a claim returned of a run that an attempt end does not
// change: while the run is running at the claim's epoch no statement
// changes these fields (a context, a rate state or a lease may change;
// every way out of running is an attempt end or an operator's action,
// and only a claim, which raises the epoch, makes a run running again).
// So an end fenced on that epoch that applies leaves them as they are.
type heldRun struct {
	seq, epoch, created, started        int64
	process, event, correlation, parent string
	rateKey, concKey                    string
	depth, attempts, priority           int
	// fresh is set if the claim was the run's first (epoch 1): no attempt
	// before it recorded an effect, and none but this one can while it
	// holds the run, so the run has no effect records but those whose
	// starts this store sent for it (keys, kept for fresh runs only).
	fresh bool
	keys  []string
}

// heldRuns are the runs this store claimed, by id, as their claims
// returned them; safe for concurrent use (claims and ends come from
// every writer). Runs enter after their claim commits and leave when an
// update of theirs returns.
type heldRuns struct {
	mu sync.Mutex
	m  map[string]heldRun
}

// remember records the runs a committed claim returned.
func (h *heldRuns) remember(runs []store.Run) {
	if len(runs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m)+len(runs) > heldMax {
		h.m = make(map[string]heldRun, len(runs))
	}
	for i := range runs {
		r := &runs[i]
		h.m[r.ID] = heldRun{seq: r.Seq, epoch: r.Epoch, created: r.CreatedAt.UnixNano(), started: r.StartedAt.UnixNano(),
			process: r.Process, event: r.Event, correlation: r.CorrelationID, parent: r.ParentID,
			rateKey: r.RateKey, concKey: r.ConcurrencyKey, depth: r.Depth, attempts: r.Attempts, priority: r.Priority, fresh: r.Epoch == 1}
	}
}

// forget drops the record of the run id.
func (h *heldRuns) forget(id string) {
	h.mu.Lock()
	delete(h.m, id)
	h.mu.Unlock()
}

// at returns, for each id with its attempt's epoch, the record of the run
// if this store claimed it at that epoch.
func (h *heldRuns) at(ids []string, epochs []int64) ([]heldRun, []bool) {
	runs, ok := make([]heldRun, len(ids)), make([]bool, len(ids))
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, id := range ids {
		if r, found := h.m[id]; found && r.epoch == epochs[i] {
			runs[i], ok[i] = r, true
		}
	}
	return runs, ok
}

// newEffect records that a start of effect key is sent for the run id at
// epoch, and reports whether the run held at that epoch can have no
// record of key: the claim was its first and no start of key was sent for
// it before (even one that did not apply, or a batch retried command by
// command: only the first send may take the key as new). A start of a new
// key is a plain insert (effStartNew), without the conflict check an
// upsert costs.
func (h *heldRuns) newEffect(id string, epoch int64, key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.m[id]
	if !ok || r.epoch != epoch || !r.fresh {
		return false
	}
	if slices.Contains(r.keys, key) {
		return false
	}
	r.keys = append(r.keys, key)
	h.m[id] = r
	return true
}

// heldEnd is what an end of a held run returns (heldEnds): the fields
// its claim did not give.
type heldEnd struct {
	then, idem, version, groupKey, waitKey string
}

// endedRun is the run an attempt end left, as updCols would return it,
// for a run held from its claim (h), its id, the rest as the end
// returned it (e) and the end's writes (a): every field the end may
// write it sets (a claim leaves output and retry_at NULL, and a kept one
// stays so) or returns.
func endedRun(h *heldRun, id string, e *heldEnd, a *sets) store.Run {
	r := store.Run{ID: id, Seq: h.seq, Process: h.process, Event: h.event, CorrelationID: h.correlation, ParentID: h.parent,
		Depth: h.depth, Attempts: h.attempts, Epoch: h.epoch, CreatedAt: time.Unix(0, h.created), StartedAt: time.Unix(0, h.started),
		Priority: h.priority, RateKey: h.rateKey, ConcurrencyKey: h.concKey,
		Then: e.then, IdempotencyKey: e.idem, Version: e.version, GroupKey: e.groupKey, WaitKey: e.waitKey}
	r.Status = store.Status(a.status)
	r.Error, r.ErrorCode = a.err, a.code
	if a.outSet {
		r.Output = bytes.Clone(a.out)
	}
	if a.retrySet {
		r.RetryAt = fromNS(a.retry)
	}
	r.CompletedAt = fromNS(a.completed)
	return r
}
