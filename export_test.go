package yella

// NodeStopped reports whether e's node on a shared store has stopped
// claiming (the first step of Stop on such a store, after it pauses
// dispatch): a test that must act only once it has waits for it instead
// of sleeping for a guess. False on any other store.
func NodeStopped(e *Engine) bool {
	if e.node == nil {
		return false
	}
	e.node.mu.Lock()
	defer e.node.mu.Unlock()
	return e.node.stopped
}
