package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// nodeSet is the owners that joined through this store.
type nodeSet struct {
	mu sync.Mutex
	n  map[string]int
}

func (ns *nodeSet) add(owner string) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.n == nil {
		ns.n = map[string]int{}
	}
	ns.n[owner]++
}

func (ns *nodeSet) remove(owner string) (last bool) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.n[owner]--
	if ns.n[owner] > 0 {
		return false
	}
	delete(ns.n, owner)
	return true
}

func (ns *nodeSet) all() []string {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	out := make([]string, 0, len(ns.n))
	for o := range ns.n {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

// ErrOwnerLive: Join was given the owner id of a node that is alive.
var ErrOwnerLive = errors.New("owner id is in use by a live node")

// Join implements store.Shared. The node's heartbeat is stamped with the
// database's clock every Options.NodeHeartbeat until leave (or Close). An
// owner id whose node's heartbeat is older than Options.NodeTimeout is
// free again: joining takes it over, and the runs its earlier process left
// running are abandoned (their leases end now).
func (s *Store) Join(ctx context.Context, owner string) (leave func(context.Context) error, err error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var rejoined bool
		err := tx.QueryRow(ctx, s.q.nodeJoin, owner, s.opts.NodeTimeout.Seconds()).Scan(&rejoined)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("pgstore: join as %s: %w (two engine processes must not share an owner id)", owner, ErrOwnerLive)
		}
		if err != nil || !rejoined {
			return err
		}
		_, err = tx.Exec(ctx, s.q.nodeAbandon, owner)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.nodes.add(owner)
	var once sync.Once
	return func(ctx context.Context) error {
		var err error
		once.Do(func() {
			if !s.nodes.remove(owner) || s.readable() != nil {
				return
			}
			_, err = s.pool.Exec(ctx, s.q.nodeLeave, []string{owner})
		})
		return err
	}, nil
}

// heartbeats stamps the joined nodes' heartbeats on the database's clock,
// and marks gone the nodes whose heartbeat is too old, telling every node
// (NOTIFY, and this store's watchers) so that their runs are taken over at
// once. Only a store with joined nodes looks for gone ones.
func (s *Store) heartbeats() {
	defer s.bg.Done()
	t := time.NewTicker(s.opts.NodeHeartbeat)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-s.bgCtx.Done():
			return
		case <-t.C:
		}
		owners := s.nodes.all()
		if len(owners) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(s.bgCtx, s.opts.NodeTimeout)
		if err := s.beat(ctx, owners, tick); err != nil && s.bgCtx.Err() == nil {
			s.log.Warn("node heartbeat failed", "err", err)
		}
		cancel()
	}
}

func (s *Store) beat(ctx context.Context, owners []string, tick int) error {
	if _, err := s.pool.Exec(ctx, s.q.nodeBeat, owners); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, s.q.nodeGone, s.opts.NodeTimeout.Seconds())
	if err != nil {
		return err
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(gone) > 0 {
		s.log.Info("nodes gone: their runs are taken over", "nodes", gone)
		if _, err := s.pool.Exec(ctx, s.q.notify, s.channel, kindGone+":"+s.id); err != nil {
			return err
		}
		s.watch.fire(store.ChangeGone)
	}
	if tick%600 == 0 {
		_, err = s.pool.Exec(ctx, s.q.nodeForget)
	}
	return err
}

// Nodes implements store.Shared. The nodes and the runs they hold are
// read in one snapshot, so a run handed from one node to another is
// counted once.
func (s *Store) Nodes(ctx context.Context, limit int) ([]store.Node, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	var out []store.Node
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, s.q.nodeList, s.opts.NodeTimeout.Seconds(), limit)
		if err != nil {
			return err
		}
		var owners []string
		at := map[string]int{}
		for rows.Next() {
			var n store.Node
			var age float64
			if err := rows.Scan(&n.Owner, &n.JoinedAt, &n.Seen, &age, &n.Gone); err != nil {
				rows.Close()
				return err
			}
			n.Age = time.Duration(age * float64(time.Second))
			at[n.Owner] = len(out)
			owners = append(owners, n.Owner)
			out = append(out, n)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(owners) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, s.q.nodeHeld, owners)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var owner, process string
			var n int64
			if err := rows.Scan(&owner, &process, &n); err != nil {
				return err
			}
			node := &out[at[owner]]
			if node.ByProcess == nil {
				node.ByProcess = map[string]int64{}
			}
			node.ByProcess[process] = n
			node.Running += n
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: nodes: %w", err)
	}
	return out, nil
}
