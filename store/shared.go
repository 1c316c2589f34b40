package store

import (
	"context"
	"time"
)

// Shared is implemented by a store that several engine processes use at
// once, each one a node (store/pgstore: several processes on one
// PostgreSQL database). The engine detects it and then works differently
// in three ways:
//
//   - Claims. A node's in-memory index cannot know the runs other nodes
//     admit, retry or reclaim, so the engine does not claim runs it
//     indexed itself: it asks the store for the next claimable runs
//     (ClaimNext), as many as it has free slots, and the store picks them
//     atomically across nodes, in priority order, within the processes'
//     running caps counted across every node.
//   - Wake-ups. The engine claims again when it admits or frees something
//     itself, when Watch reports that another node did (an admission, a
//     retry, a node found gone), at the retry time ClaimNext reports, and
//     on a jittered poll that bounds the latency of a lost notification.
//   - Nodes. An engine joins as a node when it starts and leaves when it
//     stops. The store keeps a joined node alive on the database's clock;
//     a node whose heartbeat is older than the store's bound is gone, and
//     Abandoned reports the runs it held at once, whatever their leases
//     say.
//
// Times. Store methods take their times from the caller (see the package
// doc), and a shared store still dates every record and judges the
// caller's own leases with them. Whether another node is gone is decided
// on the database's clock instead: nodes' clocks may disagree by more than
// a lease, and a node whose clock runs ahead would otherwise take runs
// that a live node holds. A lease held by a live node is never judged on
// another node's clock.
type Shared interface {
	Store

	// Join registers owner (an engine's lease owner id) as a live node and
	// keeps it alive until leave is called or the store is closed. It fails
	// while another live node has the same owner id. Runs still held under
	// owner from an earlier process (a crash, then a restart with the same
	// id) are abandoned when it joins: Abandoned reports them.
	Join(ctx context.Context, owner string) (leave func(context.Context) error, err error)

	// ClaimNext claims up to req.Limit idle runs of req.Processes that are
	// due at req.Now, in Rank order (then Seq), for req.Owner until req.LeaseUntil, as
	// Claim does. Runs another node is claiming at the same moment are
	// skipped, not waited for. A process with a cap in req.Processes never
	// has more runs running than its cap, across every node.
	ClaimNext(ctx context.Context, req ClaimNextRequest) (ClaimNextResult, error)

	// Watch calls fn with what another node may have changed, until stop
	// is called: fn must not block. Changes may be coalesced, repeated or
	// lost (a dropped connection); the engine's poll bounds the cost of a
	// lost one to latency. After a reconnection every change is reported.
	Watch(fn func(Change)) (stop func())

	// Nodes lists up to limit nodes of the store (limit <= 0: none), live
	// ones first, then by owner id, with the runs each holds. It is for
	// operators: what it reads may be a moment old when it returns.
	Nodes(ctx context.Context, limit int) ([]Node, error)
}

// Node is one node of a shared store, as Nodes reads it. Its times are on
// the database's clock, like the judgement of whether it is gone.
type Node struct {
	Owner    string    // the engine's lease owner id
	JoinedAt time.Time // when it joined (or joined again)
	Seen     time.Time // its last heartbeat
	// Age is how long ago Seen was, on the database's clock.
	Age time.Duration
	// Gone: its heartbeat is older than the store's bound (or it was
	// found gone): the runs it holds are being taken over.
	Gone bool
	// Running is how many runs it holds (running under its owner id);
	// ByProcess splits them by process (nil when it holds none).
	Running   int64
	ByProcess map[string]int64
}

// ClaimNextRequest asks a shared store for the next claimable runs.
type ClaimNextRequest struct {
	Owner      string
	Now        time.Time
	LeaseUntil time.Time
	// Processes maps every process the caller executes to its running cap
	// across all nodes (0: no cap).
	Processes map[string]int
	// Flows maps the processes of Processes that have flow limits to them.
	// Due runs are claimed in Rank order (then Seq); a run whose rate key
	// does not allow a start now (its state kept with the runs' claims, as
	// ClaimRequest.RateTATs keeps it) or whose concurrency key already has
	// KeyConcurrency runs running, on any node, is skipped, and runs
	// behind it are claimed.
	Flows map[string]Flow
	// Limit bounds the runs claimed (the caller's free slots).
	Limit int
	// Room, if set, is asked for the caller's free slots when the claim
	// runs rather than when it is requested: the claim takes at most
	// min(Limit, Room()) runs. Slots that free while the claim waits for
	// the store (its writer busy with the transaction before) are filled
	// by it, instead of by a claim of their own a transaction later. The
	// store calls it from its own goroutine, while the caller waits for
	// ClaimNext: it must be safe for that, quick, and not call the store.
	Room func() int
}

// ClaimNextResult is what ClaimNext claimed and what it left.
type ClaimNextResult struct {
	// Runs are the claimed runs, with what Claim returns.
	Runs []Run
	// More: idle runs of the requested processes are left (not due yet,
	// held back by a cap, or beyond Limit).
	More bool
	// NextAt is the earliest time after Now at which an idle run of the
	// requested processes becomes due or its rate key allows a start
	// (zero: none is waiting for a time). A store may
	// leave it zero when it claimed Limit runs: the caller claims again.
	NextAt time.Time
	// Limit is the bound the claim applied: the request's Limit, or what
	// its Room answered when that was less. Fewer runs than Limit means
	// the store had no more to give.
	Limit int
}

// Change is what a shared store reports through Watch.
type Change uint8

// Changes.
const (
	// ChangeReady: runs may have become claimable (admitted, retried,
	// requeued by another node or process).
	ChangeReady Change = 1 << iota
	// ChangeGone: a node was found gone; the runs it held are abandoned.
	ChangeGone
)

// Admitter admits the runs of one emission. Every Store is one; a shared
// store may also offer one that admits inside a caller's own database
// transaction (pgstore.Store.Tx), so that a business write and the runs it
// causes commit together or not at all.
type Admitter interface {
	Admit(ctx context.Context, a Admission) (AdmitResult, error)
}

// RollupCompactor is implemented by a store where several engines add
// rollups for the same process and bucket (a shared store: one row per
// node per bucket). CompactRollups replaces up to limit groups of rows of
// one process and bucket, among buckets before before, each by the single
// rollup merge returns for it, in one transaction: readers see either the
// rows or their merge. Two engines compacting at once each take rows the
// other has not locked, so nothing is counted twice; a row added later to
// a compacted bucket is merged by a later call.
type RollupCompactor interface {
	CompactRollups(ctx context.Context, before time.Time, limit int, merge func([]Rollup) (Rollup, error)) (groups int, err error)
}
