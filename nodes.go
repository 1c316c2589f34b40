package yella

import (
	"context"
	"maps"
	"time"

	"github.com/yella-go/yella/store"
)

// Default and maximum sizes of a node listing (Nodes).
const (
	DefaultNodeLimit = 100
	MaxNodeLimit     = 1000
)

// NodeList is what Nodes reads: the engine processes that share the store,
// or, on a single-node store, none.
type NodeList struct {
	// Shared: the store is shared by several engine processes, each a node
	// (a PostgreSQL store). false on a single-node store (SQLite, memory):
	// the engine that holds it is its only one, and Nodes is empty.
	Shared bool
	// Self is this engine's owner id: the node it is once started.
	Self string
	// Nodes are the store's nodes, live ones first, then by owner id.
	Nodes []Node
}

// Node is one engine process on a shared store. Its times are the
// database's, the clock on which the store decides that a node is gone.
type Node struct {
	Owner    string    // the engine's owner id (Engine.Owner, Run.Owner)
	JoinedAt time.Time // when it joined
	Seen     time.Time // its last heartbeat
	// Age is how long ago Seen was, on the database's clock.
	Age time.Duration
	// Gone: its heartbeat is older than the store's bound; the runs it
	// still holds are being taken over by the live nodes.
	Gone bool
	// Self: this engine.
	Self bool
	// Running is how many runs it holds; ByProcess splits them by process
	// (nil when it holds none).
	Running   int64
	ByProcess map[string]int64
}

// Nodes lists up to limit nodes of a shared store (0: DefaultNodeLimit;
// at most MaxNodeLimit) with the runs each holds. On a single-node store
// it returns Shared false and no nodes.
func (e *Engine) Nodes(ctx context.Context, limit int) (NodeList, error) {
	switch {
	case limit < 0:
		return NodeList{}, &Error{Code: CodeInvalidQuery, Op: "nodes", Msg: "limit must not be negative"}
	case limit == 0:
		limit = DefaultNodeLimit
	case limit > MaxNodeLimit:
		limit = MaxNodeLimit
	}
	out := NodeList{Self: e.owner, Nodes: []Node{}}
	sh, ok := e.store.(store.Shared)
	if !ok {
		return out, nil
	}
	out.Shared = true
	nodes, err := sh.Nodes(ctx, limit)
	if err != nil {
		return NodeList{}, storeErr("nodes", "", err)
	}
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, Node{Owner: n.Owner, JoinedAt: n.JoinedAt, Seen: n.Seen, Age: n.Age, Gone: n.Gone,
			Self: n.Owner == e.owner, Running: n.Running, ByProcess: maps.Clone(n.ByProcess)})
	}
	return out, nil
}
