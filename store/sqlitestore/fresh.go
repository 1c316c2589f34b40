package sqlitestore

import (
	"hash/maphash"
	"time"

	"github.com/yella-go/yella/store"
)

// freshRing is the number of admitted runs the writer keeps for their
// claims (Store.fresh): the runs of the last freshRing seqs.
const freshRing = 1 << 15

// freshRun is a run as its admission wrote it, kept by the writer for its
// claim (Store.fresh): with it the claim returns only the run's payload
// and context (freshCols), not the whole run. SQLite runs a statement with
// RETURNING by writing its rows to a table of its own and reading them
// back, column by column, which made the claim the writer's dearest
// statement. The payload stays in the database: keeping it would cost the
// memory of the whole backlog. A slot is 48 bytes: the id is the claim's
// own (only its hash is kept, to tell the slot's run from another), and
// the process and event names are kept once each (freshNames).
type freshRun struct {
	seq             int64 // 0: an empty slot
	idHash          uint64
	created         int64
	depth, priority int32
	names           uint32      // index into freshNames.of
	x               *freshExtra // nil for a root run without keys
}

// freshNames are the process and event names of the kept runs, each pair
// once.
type freshNames struct {
	index map[[2]string]uint32
	of    [][2]string
}

// freshNamesMax bounds freshNames: a run with a pair of names past it is
// not kept.
const freshNamesMax = 1 << 12

// freshExtra holds the fields of a kept run that most runs leave empty.
type freshExtra struct {
	correlation, parent, idem, rateKey, concKey, groupKey string
}

// keepFresh keeps run r, just admitted by the writer, for its claim, in
// the ring slot of its seq (an older run there is forgotten: its claim
// returns it whole). Runs are kept only once the writer has claimed a run
// (Store.claiming): a store that only admits has no use for them. A run
// due later (RetryAt) is not kept, nor one whose depth or priority a slot
// cannot hold (the engine bounds both far below). A kept run is not
// forgotten when it changes: its claim finds it only as admitted, by its
// seq, and falls back to the claim that returns the run otherwise (see
// claimFreshSQL). A slot is used only by the run whose id and seq it holds
// (freshOf), and a rolled-back transaction empties them all (Store.abort),
// so a slot never names a seq that another run holds.
func (s *Store) keepFresh(r *store.Run) {
	if !s.claiming || !r.RetryAt.IsZero() || r.Seq <= 0 || int(int32(r.Depth)) != r.Depth || int(int32(r.Priority)) != r.Priority {
		return
	}
	n := &s.freshNames
	k := [2]string{r.Process, r.Event}
	names, ok := n.index[k]
	if !ok {
		if len(n.of) >= freshNamesMax {
			return
		}
		if n.index == nil {
			n.index = map[[2]string]uint32{}
		}
		names = uint32(len(n.of))
		n.index[k] = names
		n.of = append(n.of, k)
	}
	if s.fresh == nil {
		s.fresh = make([]freshRun, freshRing)
	}
	f := &s.fresh[r.Seq&(freshRing-1)]
	*f = freshRun{seq: r.Seq, idHash: maphash.String(s.freshSeed, r.ID), created: r.CreatedAt.UnixNano(),
		depth: int32(r.Depth), priority: int32(r.Priority), names: names}
	if r.CorrelationID != r.ID || r.ParentID != "" || r.IdempotencyKey != "" || r.RateKey != "" || r.ConcurrencyKey != "" || r.GroupKey != "" {
		f.x = &freshExtra{correlation: r.CorrelationID, parent: r.ParentID, idem: r.IdempotencyKey,
			rateKey: r.RateKey, concKey: r.ConcurrencyKey, groupKey: r.GroupKey}
	}
}

// freshOf is the kept run id at seq, or nil.
func (s *Store) freshOf(id string, seq int64) *freshRun {
	if s.fresh == nil || seq <= 0 {
		return nil
	}
	f := &s.fresh[seq&(freshRing-1)]
	if f.seq != seq || f.idHash != maphash.String(s.freshSeed, id) {
		return nil
	}
	return f
}

// freshSeq is the seq a claim request gives for its i-th run, or 0.
func freshSeq(req *store.ClaimRequest, i int) int64 {
	if i < len(req.Seqs) {
		return req.Seqs[i]
	}
	return 0
}

// claimedFresh is the kept run f, id, after its claim by owner at now until
// until (claimFreshSQL), with the payload and context the claim returned:
// its first attempt, at epoch 1, as claimCols would read it. The slot is
// emptied.
func (s *Store) claimedFresh(f *freshRun, id, owner string, now, until time.Time, payload, context []byte) store.Run {
	names := s.freshNames.of[f.names]
	r := store.Run{ID: id, Seq: f.seq, Process: names[0], Event: names[1], CorrelationID: id,
		Depth: int(f.depth), Status: store.StatusRunning, Payload: payload, Context: context,
		Attempts: 1, Epoch: 1, LeaseOwner: owner, LeaseExpires: until, CreatedAt: time.Unix(0, f.created), StartedAt: now,
		Priority: int(f.priority)}
	if x := f.x; x != nil {
		r.CorrelationID, r.ParentID, r.IdempotencyKey = x.correlation, x.parent, x.idem
		r.RateKey, r.ConcurrencyKey, r.GroupKey = x.rateKey, x.concKey, x.groupKey
	}
	*f = freshRun{}
	return r
}

// freshScan is where the writer reads a row of freshCols.
type freshScan struct {
	seq              int64
	payload, context []byte
	large            bool
	dest             []any
}

// scan reads one row of freshCols.
func (c *freshScan) scan(sc scanner) error {
	if c.dest == nil {
		c.dest = []any{&c.seq, &c.payload, &c.context, &c.large}
	}
	c.payload, c.context = nil, nil
	return sc.Scan(c.dest...)
}
