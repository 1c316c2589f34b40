package yella

import (
	"errors"

	"github.com/yella-go/yella/store"
)

// A claim through a shared store can commit on the server and still fail
// on the node: the connection breaks between the COMMIT and its answer (a
// database restart, a network cut). The node then holds runs it does not
// know of, and its own heartbeats would renew their leases for as long as
// it lives, so no node would ever run them. The heartbeat finds them: runs
// the store says this node holds that it neither executes, nor has claimed
// and not begun, nor is recording an outcome for. One found at two
// heartbeats in a row (so a claim answered in between is never mistaken
// for one) is handed back, idle again for any node; its epoch fences the
// attempt in the unlikely case one was begun after all.

// handBackOrphans hands back the runs held but unknown at this heartbeat
// and the previous one (on a shared store).
func (e *Engine) handBackOrphans(held map[string]int64) {
	if e.node == nil {
		return
	}
	var unknown []store.Lease
	e.mu.Lock()
	for id, ep := range held {
		if _, ok := e.running[id]; !ok && e.writing[id] == 0 {
			unknown = append(unknown, store.Lease{RunID: id, Epoch: ep})
		}
	}
	e.mu.Unlock()
	for _, l := range e.node.orphans(unknown) {
		e.log.Warn("a run this node holds but never received (a claim whose answer was lost) is handed back", "run", l.RunID, "epoch", l.Epoch)
		u := store.Update{RunID: l.RunID, Epoch: l.Epoch, Now: e.clock.Now(), Action: store.ActionHandBack,
			Note: "claimed by this node, but the claim's answer was lost"}
		if _, err := e.store.Update(e.io, u); err != nil && !errors.Is(err, store.ErrFenced) {
			e.storeFailed("hand back", err)
		}
	}
}

// orphans returns the runs of unknown that were unknown at the previous
// heartbeat too, at the same epoch, and are not claimed and waiting to
// begin; it remembers the others for the next heartbeat.
func (n *node) orphans(unknown []store.Lease) []store.Lease {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []store.Lease
	next := map[string]int64{}
	for _, l := range unknown {
		if _, ok := n.claimed[l.RunID]; ok {
			continue
		}
		if ep, ok := n.suspects[l.RunID]; ok && ep == l.Epoch {
			out = append(out, l)
			continue
		}
		next[l.RunID] = l.Epoch
	}
	n.suspects = next
	return out
}
