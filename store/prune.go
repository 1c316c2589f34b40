package store

// PruneScan bounds the runs one retention call reads: PruneScan×Limit.
const PruneScan = 20

// PruneWindow decides one retention call (Store.Prune) of a store that
// keeps no index of completed runs, so that no completion writes one for
// retention alone. Such a store reads its runs in seq order, at most
// Rows() per call, from where its last call stopped (Next), and hands
// each run read to Add, which says whether to prune it and whether to
// read on.
//
// Reads go in passes, from the first run to the first admitted at or after
// the cut (a run admitted after the cut cannot have completed before it)
// or the table's end; the next call then starts a pass. The runs a pass
// keeps (not completed, or a parent whose child is left) are read again by
// the next pass, which prunes a parent once its children are gone. A call
// that prunes fewer than its limit has ended its pass or read its bound of
// runs that are kept, so an old backlog of runs never pruned (dead
// letters) is passed over a bounded read per call. The place is a hint
// only: a run a call skips is read by the next pass.
type PruneWindow struct {
	limit, read, taken int
	from               int64
	over               bool
}

// NewPruneWindow starts a call that reads after seq from (0: a new pass)
// and prunes at most limit runs.
func NewPruneWindow(from int64, limit int) PruneWindow {
	return PruneWindow{limit: limit, from: from}
}

// Rows is the most runs the call reads.
func (w *PruneWindow) Rows() int { return PruneScan * w.limit }

// Add takes the next run read: its seq, whether it was admitted at or
// after the cut, and whether it is to be pruned (completed before the cut,
// with nothing that keeps it). take: prune it; more: read the next run.
func (w *PruneWindow) Add(seq int64, admittedAfterCut, prunable bool) (take, more bool) {
	w.read++
	if admittedAfterCut {
		w.over = true
		return false, false
	}
	w.from = seq
	if !prunable {
		return false, true
	}
	w.taken++
	return true, w.taken < w.limit
}

// Next is where the store's next call reads on: 0 when this call ended
// its pass (at the cut or at the table's end).
func (w *PruneWindow) Next() int64 {
	if w.over || (w.taken < w.limit && w.read < w.Rows()) {
		return 0
	}
	return w.from
}
