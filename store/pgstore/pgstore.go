// Package pgstore is a store.Store on PostgreSQL that several engine
// processes share: each process is a node, and a node that dies has its
// runs taken over by the others within seconds.
//
// It implements store.Shared, which the engine detects:
//
//   - Claims. Nodes claim with ClaimNext: the oldest due idle runs, in
//     batches, with FOR UPDATE SKIP LOCKED, so nodes never wait for each
//     other's rows. A process's running cap (Process.Concurrency) and its
//     admission bound are exact across nodes: each is decided under a
//     transaction-scoped advisory lock of its own for the process, taken
//     only by processes that have a cap.
//   - Waits. A waiting run is claimable once its deadline has passed: a
//     claim makes such runs idle first and claims them with the others.
//     A signal and a wait for its key are decided under a
//     transaction-scoped advisory lock of the key, so whichever commits
//     second sees the other: a signal is never kept while a run goes on
//     waiting for it (see signal.go).
//   - Wake-ups. A transaction that makes runs claimable sends a NOTIFY
//     (at most one per Options.NotifyInterval per store, with a trailing
//     one for what the interval held back); every store LISTENs and tells
//     its engine. Engines also poll, so a lost notification costs latency
//     only.
//   - Group commit. Each store has Options.Writers writer goroutines; each
//     takes every queued write (up to Options.MaxBatch), runs them in one
//     transaction and answers the callers only after COMMIT. Attempt ends,
//     effect records and heartbeats of one batch are one statement each
//     (arrays and unnest), whatever their number. A batch of attempt
//     ends, effect records and claims of uncapped processes only, whose
//     statements count the status changes they make, is one round trip:
//     BEGIN, the statements and COMMIT in one pipeline. An admission
//     batch of many runs is committed by a bulk writer of its own, so
//     that the node's claims and attempt ends never wait behind it.
//   - Nodes and fencing. An engine joins as a node; its store heartbeats it
//     on the database's clock (now()) every Options.NodeHeartbeat. A node
//     whose heartbeat is older than Options.NodeTimeout is gone: the first
//     node to see it marks it and notifies every node, which reclaim its
//     runs at once. Every write made for an attempt carries its lease epoch
//     in its WHERE clause, so a node that was only paused (SIGSTOP, a long
//     GC, a partition) and comes back cannot complete, or record an effect
//     of, a run that was taken over.
//
// Every table lives in one schema (Options.Schema), created and migrated
// at Open under an advisory lock; a schema written by a newer version is
// refused (ErrNewerSchema), so is an older one while nodes of an older
// build are live on it (ErrSchemaInUse), and so is one that holds tables
// of something else (ErrForeignSchema), which is left untouched. Durability is PostgreSQL's: a commit is
// acknowledged when the server says it is durable under its own
// synchronous_commit setting.
package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yella-go/yella/store"
)

// ErrNewerSchema: the schema was written by a newer version of this store.
var ErrNewerSchema = errors.New("database schema is newer than this build")

// ErrSchemaInUse: the schema is of an older version, which Open would
// migrate, while nodes of an older build are live on it. A build writes
// the schema it knows, so such a node would go on writing what the newer
// version no longer reads the same way (version 7, for one, finds a
// chain's follow-ups through links their admission writes, which an
// older build does not). Stop them, then open: a node is live until its
// heartbeat is older than Options.NodeTimeout.
var ErrSchemaInUse = errors.New("the schema is in use by live nodes of an older build")

// Options configures a Store. The zero value means defaults.
type Options struct {
	// Schema is the PostgreSQL schema that holds the store's tables: a
	// lower-case identifier. Stores on different schemas of one database
	// are independent. Defaults to "yella".
	Schema string
	// MaxConns bounds the store's connection pool (the listener has one
	// more of its own). Defaults to Writers + 6.
	MaxConns int
	// Writers is the number of group-commit writers: while one commits,
	// another fills its batch. Defaults to 1: on a small server more
	// writers split the batches without a gain to show for it (measured
	// on 2 vCPUs with a local server: two writers cut a transaction from
	// 16 to 11 commands, and 15 alternating drains against one writer
	// ranged from -22% to +29% runs/s).
	Writers int
	// MaxBatch bounds the writes committed in one transaction. Defaults to
	// 256.
	MaxBatch int
	// NodeHeartbeat is how often the store stamps the heartbeat of the
	// nodes that joined through it, on the database's clock. Defaults to
	// 1s.
	NodeHeartbeat time.Duration
	// NodeTimeout is how old a node's heartbeat may get before the node is
	// gone and the runs it holds are taken over. Defaults to 5s; it must be
	// at least twice NodeHeartbeat.
	NodeTimeout time.Duration
	// NotifyInterval is the shortest time between two wake-up
	// notifications this store sends: a burst of admissions costs one
	// NOTIFY per interval, plus one at its end. Defaults to 10ms.
	NotifyInterval time.Duration
	// MustExist makes Open fail with ErrNoSchema when the schema does not
	// exist (or holds no table) instead of creating it: for tools that
	// look at a store and must not leave an empty one behind. An existing
	// schema is still migrated.
	MustExist bool
	// ConnectTimeout bounds each connection attempt when the URL sets no
	// connect_timeout, so that an unreachable server fails Open instead of
	// hanging it. Defaults to 10s.
	ConnectTimeout time.Duration
	// Logger receives the store's logs. Defaults to discarding them.
	Logger *slog.Logger
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

func (o Options) withDefaults() (Options, error) {
	if o.Schema == "" {
		o.Schema = "yella"
	}
	if !schemaName.MatchString(o.Schema) {
		return o, fmt.Errorf("pgstore: Options.Schema must be a lower-case identifier (letters, digits, _; at most 48), got %q", o.Schema)
	}
	if o.MaxConns < 0 || o.Writers < 0 || o.MaxBatch < 0 || o.NodeHeartbeat < 0 || o.NodeTimeout < 0 || o.NotifyInterval < 0 || o.ConnectTimeout < 0 {
		return o, errors.New("pgstore: Options.MaxConns, Writers, MaxBatch, NodeHeartbeat, NodeTimeout, NotifyInterval and ConnectTimeout must not be negative")
	}
	if o.Writers == 0 {
		o.Writers = 1
	}
	if o.MaxConns == 0 {
		o.MaxConns = o.Writers + 6
	}
	if o.MaxConns < o.Writers+2 {
		return o, fmt.Errorf("pgstore: Options.MaxConns (%d) must be at least Writers + 2 (%d)", o.MaxConns, o.Writers+2)
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 256
	}
	if o.NodeHeartbeat == 0 {
		o.NodeHeartbeat = time.Second
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = max(5*time.Second, 2*o.NodeHeartbeat)
	}
	if o.NodeTimeout < 2*o.NodeHeartbeat {
		return o, fmt.Errorf("pgstore: Options.NodeTimeout (%s) must be at least twice NodeHeartbeat (%s)", o.NodeTimeout, o.NodeHeartbeat)
	}
	if o.NotifyInterval == 0 {
		o.NotifyInterval = 10 * time.Millisecond
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o, nil
}

// Store is a PostgreSQL store.Store shared by several engine processes.
// Create it with Open.
type Store struct {
	opts    Options
	log     *slog.Logger
	pool    *pgxpool.Pool
	id      string // this store's id in notifications
	channel string // the NOTIFY channel of the schema
	q       queries

	cmds    chan *cmd // the group-commit writers' queue
	bulk    chan *cmd // the bulk writer's (see bulkRuns)
	writers sync.WaitGroup
	closeMu sync.RWMutex
	closed  bool

	bgCtx  context.Context // background goroutines (heartbeats, listener)
	bgStop context.CancelFunc
	bg     sync.WaitGroup

	nodes   nodeSet
	owners  ownerNums
	held    heldRuns
	watch   watchers
	notify  notifier
	statsMu sync.Mutex
	stats   Stats

	// pruneFrom is where this node's retention reads on (Prune): only a
	// hint, since a run it skips is read in the next pass.
	pruneFrom atomic.Int64
}

var (
	_ store.Shared      = (*Store)(nil)
	_ store.EffectQueue = (*Store)(nil)
)

// Stats describes the writers' work since Open.
type Stats struct {
	Batches  int64 // transactions committed
	Commands int64 // writes committed in them
	// CommitNanos is the time the writers spent in the transactions
	// committed, from asking the pool for a connection to COMMIT's
	// answer: divided by Batches, the mean latency of a write's commit.
	CommitNanos int64
	Notifies    int64 // wake-up notifications sent
	// HeldEnds are the attempt ends committed that named their runs by
	// the seqs their claims returned (heldRuns) and read back only what
	// the claims did not.
	HeldEnds int64
	// OneTrip are the transactions committed in the round trip of their
	// statements: attempt ends of held runs, effect records and claims of
	// processes with no cap or flow limit, each counting what it changes.
	OneTrip int64
	// Bulk are the transactions committed by the bulk writer: admission
	// batches of many runs, committed apart from the other writes.
	Bulk int64
	// Deadlocks counts the transactions that met a deadlock, which
	// PostgreSQL broke by failing them (after its deadlock_timeout);
	// their commands were tried again, each in a transaction of its own.
	Deadlocks int64
}

// Open connects to the database at url (a PostgreSQL connection string:
// postgres://user:pass@host:port/db?sslmode=…), creates or migrates the
// store's schema and starts the writers, the node heartbeats and the
// listener.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: the database URL does not parse: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	}
	cfg.MaxConns = int32(opts.MaxConns)
	cfg.MinConns = int32(opts.Writers)
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect to %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: connect to %s: %w", where, err)
	}
	s := &Store{
		opts: opts, log: opts.Logger, pool: pool, id: newStoreID(),
		channel: "yella_" + opts.Schema,
		q:       newQueries(pgx.Identifier{opts.Schema}.Sanitize()),
		cmds:    make(chan *cmd, 4*opts.MaxBatch),
		bulk:    make(chan *cmd, 64),
	}
	if err := migrate(ctx, pool, opts.Schema, s.q.schema, opts.MustExist, opts.NodeTimeout); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: schema %s on %s: %w", opts.Schema, where, err)
	}
	s.bgCtx, s.bgStop = context.WithCancel(context.Background())
	s.notify.init(s)
	for i := range opts.Writers {
		s.writers.Add(1)
		go s.writer(shardOf(i), s.cmds)
	}
	s.writers.Add(1)
	go s.writer(shardOf(opts.Writers), s.bulk)
	s.bg.Add(2)
	go s.heartbeats()
	go s.listen(cfg.ConnConfig.Copy())
	return s, nil
}

// newStoreID returns a random id for this store instance.
func newStoreID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Schema returns the schema that holds the store's tables.
func (s *Store) Schema() string { return s.opts.Schema }

// Pool returns the store's connection pool, for callers that run their own
// queries (or transactions for Tx) on the same database.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Stats returns the writers' statistics.
func (s *Store) Stats() Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.stats
}

// Close waits for queued writes, stops the writers, the heartbeats and the
// listener, removes the nodes that joined through it and closes the pool.
// Calls after Close return store.ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	close(s.cmds)
	close(s.bulk)
	s.closeMu.Unlock()
	s.writers.Wait()
	s.notify.stop()
	s.bgStop()
	s.bg.Wait()
	var err error
	if owners := s.nodes.all(); len(owners) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = s.pool.Exec(ctx, s.q.nodeLeave, owners)
		cancel()
	}
	s.pool.Close()
	return err
}

func (s *Store) readable() error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	return nil
}

// DropSchema deletes the schema named by opts (every table of the store,
// with all runs) from the database at url. It is for tests and for
// removing a store for good; no store may have the schema open.
func DropSchema(ctx context.Context, url string, opts Options) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{opts.Schema}.Sanitize()+" CASCADE")
	return err
}

// shardOf returns a counts shard for writer i: random per store, so the
// writers of different nodes rarely share one (sharing is still correct).
func shardOf(i int) int32 {
	var b [2]byte
	rand.Read(b[:])
	return int32(b[0])<<8 | int32(b[1])&^7 | int32(i&7)
}
