package pgstore

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// Notification payloads: a kind and the id of the sending store.
const (
	kindReady = "r" // runs may have become claimable
	kindGone  = "g" // a node was found gone
)

// txSender is the sender id of admissions made in a caller's transaction
// (Tx): no store's writer sent them, so every store reports them.
const txSender = "tx"

// watchers are the functions Watch registered.
type watchers struct {
	mu  sync.Mutex
	seq int
	fns map[int]func(store.Change)
}

func (ws *watchers) add(fn func(store.Change)) (stop func()) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.fns == nil {
		ws.fns = map[int]func(store.Change){}
	}
	ws.seq++
	id := ws.seq
	ws.fns[id] = fn
	return func() {
		ws.mu.Lock()
		delete(ws.fns, id)
		ws.mu.Unlock()
	}
}

func (ws *watchers) fire(c store.Change) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, fn := range ws.fns {
		fn(c)
	}
}

// Watch implements store.Shared. Changes made through this store are
// reported as soon as they commit; changes of other stores (other nodes,
// or callers' transactions: Tx) when their notification arrives.
func (s *Store) Watch(fn func(store.Change)) (stop func()) { return s.watch.add(fn) }

// notifier sends the wake-up notifications of the writers: inside the
// transaction that makes runs claimable, so that it is delivered when (and
// only if) the transaction commits, at most once per
// Options.NotifyInterval; a batch that the interval held back is covered
// by one trailing notification sent after it committed.
type notifier struct {
	s        *Store
	mu       sync.Mutex
	last     time.Time
	trailing *time.Timer
	stopped  bool
}

func (n *notifier) init(s *Store) { n.s = s }

// queue queues a notification in a batch transaction's last statements
// unless one was sent less than an interval ago; it reports whether it
// did.
func (n *notifier) queue(b *pgx.Batch) bool {
	n.mu.Lock()
	now := time.Now()
	if now.Sub(n.last) < n.s.opts.NotifyInterval {
		n.mu.Unlock()
		return false
	}
	n.last = now
	n.mu.Unlock()
	b.Queue(n.s.q.notify, n.s.channel, kindReady+":"+n.s.id)
	return true
}

// committed runs after the commit of a batch that made runs claimable:
// this store's watchers are told at once, and if the batch sent no
// notification a trailing one is scheduled (unless one is pending, which
// will fire after this commit).
func (n *notifier) committed(sent bool) {
	n.s.watch.fire(store.ChangeReady)
	n.mu.Lock()
	defer n.mu.Unlock()
	if sent {
		n.s.statsMu.Lock()
		n.s.stats.Notifies++
		n.s.statsMu.Unlock()
		return
	}
	if n.trailing != nil || n.stopped {
		return
	}
	wait := n.s.opts.NotifyInterval - time.Since(n.last)
	n.trailing = time.AfterFunc(max(wait, 0), n.trail)
}

func (n *notifier) trail() {
	n.mu.Lock()
	n.trailing = nil
	n.last = time.Now()
	stopped := n.stopped
	n.mu.Unlock()
	if stopped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.s.pool.Exec(ctx, n.s.q.notify, n.s.channel, kindReady+":"+n.s.id); err != nil {
		n.s.log.Warn("wake-up notification failed; nodes will find the runs on their next poll", "err", err)
		return
	}
	n.s.statsMu.Lock()
	n.s.stats.Notifies++
	n.s.statsMu.Unlock()
}

// stop cancels a pending trailing notification (the store is closing).
func (n *notifier) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopped = true
	if n.trailing != nil {
		n.trailing.Stop()
		n.trailing = nil
	}
}

// listen keeps a connection of its own LISTENing on the schema's channel
// and reports other stores' notifications to the watchers. After every
// (re)connection it reports every change, since notifications sent while
// it was not listening are lost.
func (s *Store) listen(cfg *pgx.ConnConfig) {
	defer s.bg.Done()
	wait := 100 * time.Millisecond
	for s.bgCtx.Err() == nil {
		if err := s.listenOnce(cfg); err != nil && s.bgCtx.Err() == nil {
			s.log.Warn("listener connection lost; reconnecting", "err", err, "in", wait)
			select {
			case <-s.bgCtx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, 5*time.Second)
			continue
		}
		wait = 100 * time.Millisecond
	}
}

func (s *Store) listenOnce(cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(s.bgCtx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(s.bgCtx, "LISTEN "+ident(s.channel)); err != nil {
		return err
	}
	s.watch.fire(store.ChangeReady | store.ChangeGone)
	for {
		msg, err := conn.WaitForNotification(s.bgCtx)
		if err != nil {
			return err
		}
		kind, from, _ := strings.Cut(msg.Payload, ":")
		if from == s.id {
			continue // this store's own: its watchers were told at commit
		}
		switch kind {
		case kindReady:
			s.watch.fire(store.ChangeReady)
		case kindGone:
			s.watch.fire(store.ChangeGone)
		}
	}
}
