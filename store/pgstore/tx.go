package pgstore

import (
	"context"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// Tx returns an admitter that admits runs inside tx, a transaction the
// caller opened on this store's database (on the store's Pool or any other
// connection to it): the runs exist if and only if tx commits, together
// with whatever else the caller wrote in it. Give it to the engine's
// EmitTx:
//
//	tx, err := st.Pool().Begin(ctx)
//	…                                   // the business write
//	em, err := eng.EmitTx(ctx, st.Tx(tx), "order:placed", order)
//	err = tx.Commit(ctx)                // the order and its runs, or neither
//
// Idempotency keys, admission bounds and groups are decided inside tx, as
// for any admission: a key admitted by a concurrent transaction makes this
// one wait for it, and a bounded process's admission lock, and the lock of
// a group with a policy (Singleton, Debounce), are held until tx ends.
// The wake-up notification is sent in tx, so nodes hear of the runs when,
// and only if, it commits. If Admit fails, tx is no longer usable: roll it
// back.
func (s *Store) Tx(tx pgx.Tx) store.Admitter { return txAdmitter{s: s, tx: tx} }

type txAdmitter struct {
	s  *Store
	tx pgx.Tx
}

// Admit implements store.Admitter.
func (a txAdmitter) Admit(ctx context.Context, adm store.Admission) (store.AdmitResult, error) {
	if err := a.s.readable(); err != nil {
		return store.AdmitResult{}, err
	}
	// Admitted runs are counted; a debounced run whose start moved
	// (idle to idle) only wakes the nodes.
	admitted, ready := 0, false
	res, err := a.s.admit(ctx, a.tx, &adm, func(from, to store.Status) {
		if from == "" && to == store.StatusIdle {
			admitted++
		}
		ready = ready || to == store.StatusIdle
	})
	if err != nil || !ready {
		return res, err
	}
	if admitted > 0 {
		// The counts row of a random shard of its own: callers' transactions
		// may last long, and must not hold a writer's row meanwhile.
		shard := -1 - rand.Int32N(64)
		if _, err := a.tx.Exec(ctx, a.s.q.addCounts, shard, []string{string(store.StatusIdle)}, []int64{int64(admitted)}); err != nil {
			return res, err
		}
	}
	_, err = a.tx.Exec(ctx, a.s.q.notify, a.s.channel, kindReady+":"+txSender)
	return res, err
}
