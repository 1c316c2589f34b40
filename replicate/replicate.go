// Package replicate copies an engine's SQLite database off the box,
// continuously, with Litestream (github.com/benbjohnson/litestream v0.5.18,
// embedded as a library and pinned to that exact version because its
// library API is not stable), and restores it from there.
//
// A replica is a directory (file:///abs/dir) or a key prefix in an
// S3-compatible bucket (s3://bucket/prefix?endpoint=...); see ParseURL.
//
// Replicating: open the store first (it creates the file and puts it in WAL
// mode), then Start; on shutdown stop the engine and close the store, then
// Close the Replicator:
//
//	st, _ := sqlitestore.Open(path, sqlitestore.Options{AutoCheckpoint: replicate.AutoCheckpoint})
//	rep, err := replicate.Start(ctx, path, target, replicate.Options{})
//	… eng.Start, work …
//	eng.Stop(ctx); st.Close(); rep.Close(ctx) // this order; see Close
//
// What a restore can lose: replication is asynchronous. Every SyncInterval
// (1 s by default) Litestream copies the new WAL frames to local staging
// files beside the database (.<name>-litestream/) and uploads them. A commit
// reaches the replica within about one to two SyncIntervals; a restore after
// the machine is lost misses the commits of that last window (the RPO), and
// is otherwise a consistent prefix of the database's history: it looks like
// a crash that also lost a tail of commits. An engine started on it fences
// effects whose start was replicated but not their result, and may run
// again the effects whose start was not replicated.
//
// Checkpoints: while replicating, Litestream holds a read transaction on the
// database and checkpoints the WAL itself (PASSIVE, at 1000 pages, after it
// has copied the frames), so the WAL stays bounded: it holds a window of
// writes of a few SyncIntervals, however long a burst lasts, longer when
// Litestream waits for a core (measured under an all-out burst of 37-90
// MB/s of WAL on 2 cores: peaks of 0.35-1.4 s of writes, 21-77 MB, at a
// 250 ms interval; up to 3 s, 86-223 MB, at 1 s; at ordinary rates a few
// MB). Its checkpoints
// take the write lock briefly; the engine's writer waits for them (the
// store's busy timeout). Open the store with
// sqlitestore.Options.AutoCheckpoint = AutoCheckpoint so the engine's own
// checkpoints become a backstop. The engine never issues RESTART or
// TRUNCATE checkpoints, which would race Litestream.
//
// Local state: Litestream keeps its staging files in .<name>-litestream/
// beside the database. While an initialized replicator cannot upload,
// they accumulate there until the replica is back. If the replica is
// unreachable when replication starts, Litestream cannot take over the
// file at all; the store's own checkpoints (AutoCheckpoint) then keep the
// WAL bounded.
//
// Other processes on the database: while replicating, other processes may
// read and write the database through SQLite (an sqlite3 shell running
// queries, writing tables of its own, checkpointing). What they must never
// do is delete the WAL the engine writes, which SQLite does when a process
// closes the database and finds no other process holding it. POSIX locks
// belong to the process, and closing any descriptor of a file drops every
// lock the process holds on it, SQLite's included; so nothing here opens
// the database file outside SQLite while the store may have it open
// (checking the file at Start goes through SQLite), and the Replicator
// holds SQLite's SHARED lock for its process as an open file description
// lock, which no close of another descriptor drops (Linux; elsewhere it
// is not available). That covers Litestream, which closes its own
// descriptor of the database whenever its setup fails (an unreachable
// replica at start, for instance). Application code in the engine's
// process must not open and close the database file either (a file-level
// backup, say): use SQLite's backup API or VACUUM INTO.
//
// Stalls: a replication that stopped can look healthy by its lag, which
// counts from the last successful sync: Litestream's syncs of nothing
// succeed. Status.Stalled says when the replica stopped following the
// database, and why.
//
// Metrics: Status is the operator-facing summary. Litestream also registers
// its own Prometheus metrics (litestream_*, labelled with the database
// path) on the default registry.
package replicate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
)

// AutoCheckpoint is the sqlitestore.Options.AutoCheckpoint to open a store
// with while it is replicated: ten times Litestream's own checkpoint
// threshold (1000 pages), as Litestream's documentation advises, so that
// Litestream does the checkpointing and the engine's writer does it only
// when Litestream does not (for instance while the replica is unreachable
// at start, when Litestream has not taken over the file yet).
const AutoCheckpoint = 10000

// DefaultSyncInterval is the default Options.SyncInterval.
const DefaultSyncInterval = time.Second

// Errors returned by Start.
var (
	// ErrNotWAL: the database file is missing, not an SQLite database, or
	// not in WAL mode. Litestream reads the WAL; open the store first.
	ErrNotWAL = errors.New("database is not an SQLite file in WAL mode")
	// ErrAlreadyReplicating: this process already replicates the database.
	// Litestream allows one replica per database.
	ErrAlreadyReplicating = errors.New("database is already being replicated by this process")
)

// Options configures Start. The zero value means defaults.
type Options struct {
	// SyncInterval is how often new commits are copied from the WAL and
	// uploaded to the replica: Litestream's DB.MonitorInterval (WAL to local
	// staging) and Replica.SyncInterval (staging to replica) both take it.
	// It bounds the window of commits a restore can lose (the RPO: about
	// one to two intervals). Defaults to DefaultSyncInterval (1 s); at least
	// 10 ms.
	SyncInterval time.Duration
	// StallAfter is how long a commit may wait to be copied from the WAL,
	// or a copied one to reach the replica, before Status reports the
	// replication stalled (Status.Stalled). Defaults to 10 × SyncInterval,
	// at least 5 s; at least 2 × SyncInterval.
	StallAfter time.Duration
	// Logger receives replication logs: every failed replica operation at
	// Error level, with the consecutive error count and the time since the
	// last successful sync, a stall and its end, and Litestream's own logs.
	// Defaults to discarding them (Status still reports errors).
	Logger *slog.Logger
}

// Replicator replicates one database continuously. Create it with Start.
// Its methods are safe for concurrent use.
type Replicator struct {
	path    string
	target  Target
	opts    Options
	started time.Time
	log     *slog.Logger

	db     *litestream.DB
	store  *litestream.Store
	client *trackedClient

	// shared holds SQLite's SHARED lock on the database for this process
	// until Close (see holdShared); nil where that is not possible.
	shared *os.File

	// The stall watcher (stall.go): dbID, walID, syncErr and stall are its
	// own; stalled is its verdict.
	dbID, walID fileID
	syncErr     string
	stall       *stallWatch
	stopWatch   chan struct{}
	watchDone   chan struct{}
	stallMu     sync.Mutex
	stalled     string

	closeOnce sync.Once
	closeErr  error
}

var (
	activeMu sync.Mutex
	active   = map[string]bool{}
)

// Start begins replicating the database at dbPath to target and returns at
// once; Litestream works in background goroutines until Close. The database
// must exist and be in WAL mode: open it with sqlitestore first.
//
// Start does not wait for the replica (it contacts it only to look up the
// region of an AWS bucket when the URL names neither region nor endpoint):
// an unreachable or misconfigured replica must not stop the engine from
// serving. Failures are logged (Options.Logger) and retried by Litestream
// with exponential backoff (one SyncInterval, doubling, at most 5 minutes),
// and Status shows the growing lag and error count. With an S3 replica the
// first failure surfaces after the AWS SDK's own 8 attempts, several
// seconds. Start fails only on bad arguments, a file Litestream cannot use,
// or an S3 client that cannot be set up. ctx bounds Start only; replication
// runs until Close.
func Start(ctx context.Context, dbPath string, target Target, opts Options) (*Replicator, error) {
	switch {
	case opts.SyncInterval == 0:
		opts.SyncInterval = DefaultSyncInterval
	case opts.SyncInterval < 10*time.Millisecond:
		return nil, fmt.Errorf("replicate: Options.SyncInterval must be at least 10ms, got %v", opts.SyncInterval)
	}
	switch {
	case opts.StallAfter == 0:
		opts.StallAfter = max(10*opts.SyncInterval, 5*time.Second)
	case opts.StallAfter < 2*opts.SyncInterval:
		return nil, fmt.Errorf("replicate: Options.StallAfter must be at least 2 × SyncInterval (%v), got %v", 2*opts.SyncInterval, opts.StallAfter)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if dbPath == "" {
		return nil, errors.New("replicate: database path is empty")
	}
	path, err := filepath.Abs(dbPath)
	if err != nil {
		return nil, fmt.Errorf("replicate: %w", err)
	}
	if err := checkWAL(ctx, path); err != nil {
		return nil, fmt.Errorf("replicate: %s: %w", path, err)
	}
	client, err := target.newClient()
	if err != nil {
		return nil, fmt.Errorf("replicate: %w", err)
	}

	activeMu.Lock()
	if active[path] {
		activeMu.Unlock()
		return nil, fmt.Errorf("replicate: %s: %w", path, ErrAlreadyReplicating)
	}
	active[path] = true
	activeMu.Unlock()

	r := &Replicator{path: path, target: target, opts: opts, started: time.Now(),
		log: opts.Logger.With("db", path, "replica", target.String())}
	r.db = litestream.NewDB(path)
	r.client = &trackedClient{ReplicaClient: client, lastSync: r.db.LastSuccessfulSyncAt, log: r.log}
	replica := litestream.NewReplicaWithClient(r.db, r.client)
	replica.SyncInterval = opts.SyncInterval
	r.db.Replica = replica
	if fc, ok := client.(*file.ReplicaClient); ok {
		fc.Replica = replica // the file client copies the database's ownership and mode
	}
	// Litestream's defaults (its CLI's): L1 every 30 s, L2 every 5 min,
	// L3 hourly, a snapshot daily, 24 h of history for point-in-time
	// restores.
	r.store = litestream.NewStore([]*litestream.DB{r.db}, litestream.CompactionLevels{
		{Level: 0},
		{Level: 1, Interval: 30 * time.Second},
		{Level: 2, Interval: 5 * time.Minute},
		{Level: 3, Interval: time.Hour},
	})
	r.store.Logger = opts.Logger.With(litestream.LogKeySystem, litestream.LogSystemStore)
	r.db.SetLogger(r.log)
	r.db.MonitorInterval = opts.SyncInterval
	// The files the engine has open now, for the stall watcher.
	if fi, err := os.Stat(path); err == nil {
		r.dbID = fileID{fi}
	}
	if fi, err := os.Stat(path + "-wal"); err == nil {
		r.walID = fileID{fi}
	}
	if err := r.store.Open(ctx); err != nil {
		r.store.Close(context.WithoutCancel(ctx))
		r.release()
		return nil, fmt.Errorf("replicate: start replicating %s to %s: %w", path, target, explain(err))
	}
	// From here on nothing fails: the descriptor holdShared opens must not
	// be closed while the store is open.
	if r.shared, err = holdShared(path); err != nil {
		r.log.Warn("cannot hold a shared lock on the database: if Litestream's setup fails (an unreachable replica), another process that opens and closes the database may delete its WAL", "error", err)
	}
	r.stall = newStallWatch(path, opts.StallAfter, r.observe())
	r.stopWatch, r.watchDone = make(chan struct{}), make(chan struct{})
	go r.watchLoop(r.stopWatch, r.watchDone)
	r.log.Info("replicating", "sync_interval", opts.SyncInterval.String(), "stall_after", opts.StallAfter.String())
	return r, nil
}

func (r *Replicator) release() {
	activeMu.Lock()
	delete(active, r.path)
	activeMu.Unlock()
}

// explain adds the fix to errors whose cause is not obvious from
// Litestream's message.
func explain(err error) error {
	if err != nil && strings.Contains(err.Error(), "custom RootCAs") {
		return fmt.Errorf("%w (AWS_CA_BUNDLE is set, and Litestream's S3 client, which brings its own HTTP client, cannot apply it: unset it and add the CA to the system trust store or SSL_CERT_FILE)", err)
	}
	return err
}

// checkWAL refuses a file Litestream cannot replicate: it must be an SQLite
// database in WAL mode. It asks SQLite rather than reading the file:
// closing a descriptor of the file drops every POSIX lock this process
// holds on it, the store's SQLite connections' included, after which
// another process (an sqlite3 shell) that opens and closes the database
// deletes the WAL the engine is writing. SQLite's own connections in one
// process share their locks and defer such closes.
func checkWAL(ctx context.Context, path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v (open the store before starting replication)", ErrNotWAL, err)
	case st.IsDir():
		return fmt.Errorf("%w: it is a directory", ErrNotWAL)
	case st.Size() < 100: // an SQLite file starts with a 100-byte header
		return fmt.Errorf("%w: not an SQLite database", ErrNotWAL)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw&_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		return err
	}
	defer db.Close()
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		if strings.Contains(err.Error(), "not a database") {
			return fmt.Errorf("%w: not an SQLite database", ErrNotWAL)
		}
		return fmt.Errorf("%w: %v", ErrNotWAL, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("%w: the file is in rollback-journal mode (open it with sqlitestore, which sets WAL, before starting replication)", ErrNotWAL)
	}
	return nil
}

// Sync copies every commit so far to the replica and returns once the
// replica holds it (or ctx ends, or the replica fails). Use it to make a
// point durable off the box, for instance before a planned failover. Close
// makes the same final sync itself.
func (r *Replicator) Sync(ctx context.Context) error {
	if err := r.db.SyncAndWait(ctx); err != nil {
		return fmt.Errorf("replicate: sync %s to %s: %w", r.path, r.target, err)
	}
	return nil
}

// Close stops replicating after a final sync of every commit to the
// replica. It retries that sync for up to 30 s, or until ctx ends, and
// returns an error if it never succeeded, or if the replica is otherwise
// not in sync (failed operations since the last successful sync): the
// error says the replica misses the last commits.
//
// Order: stop the engine and close the store FIRST, then Close the
// Replicator. Litestream keeps a plain file descriptor on the database, and
// the Replicator one for its shared lock, and both are closed here; POSIX
// record locks belong to the process, so closing any descriptor of the
// file drops every lock the process holds on it, including those of the
// store's still-open connections (Litestream's documentation forbids
// closing it while the application has connections open). Closing the store first also makes the final sync complete: the
// store's connections close without checkpointing the WAL away, since
// Litestream's connection is still open, and the final sync copies every
// commit the engine made.
//
// Close is idempotent; later calls return the first call's result.
func (r *Replicator) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		close(r.stopWatch)
		<-r.watchDone
		// Litestream opens the database lazily, at its first sync; its own
		// final sync (in store.Close) is skipped if that has not happened
		// yet, so a short-lived replicator would replicate nothing. This
		// sync opens it (or is a cheap no-op) so the final one always runs.
		syncErr := r.db.Sync(ctx)
		// Litestream's connection, the last one open (the store was closed
		// first), checkpoints the WAL into the database file when it closes,
		// which needs the lock holdShared keeps; Litestream's own connection
		// holds SHARED meanwhile.
		if r.shared != nil {
			releaseShared(r.shared)
		}
		err := r.store.Close(ctx)
		if r.shared != nil {
			r.shared.Close() // no SQLite connection of this process has the file open now
		}
		r.release()
		s := r.Status()
		if err == nil && s.ConsecutiveErrors == 0 && syncErr != nil {
			err = syncErr
		}
		switch {
		case err != nil:
			r.closeErr = fmt.Errorf("replicate: close: the final sync of %s to %s failed, the replica misses the last commits: %w", r.path, r.target, err)
		case s.ConsecutiveErrors > 0:
			last := "never"
			if !s.LastSync.IsZero() {
				last = s.LastSync.UTC().Format(time.RFC3339)
			}
			r.closeErr = fmt.Errorf("replicate: close: the replica %s is not in sync with %s: %d failed operations since the last successful sync (%s); last error: %s",
				r.target, r.path, s.ConsecutiveErrors, last, s.LastError)
		}
		if r.closeErr != nil {
			r.log.Error("replication stopped, replica not in sync", "error", r.closeErr)
			return
		}
		r.log.Info("replication stopped after a final sync")
	})
	return r.closeErr
}

// Status is the state of replication, for metrics and health checks.
type Status struct {
	// Target is the replica URL, without credentials.
	Target string
	// SyncInterval is the configured interval.
	SyncInterval time.Duration
	// LastSync is when a sync to the replica last succeeded: the replica
	// then held every commit Litestream had staged. Zero before the first.
	// Litestream syncs every SyncInterval even when idle, so it stays
	// recent while replication is healthy.
	LastSync time.Time
	// Lag is the time since LastSync (since Start before the first): about
	// one SyncInterval when healthy, growing while the replica fails. The
	// commits a restore would lose now are those of about the last
	// Lag + SyncInterval.
	Lag time.Duration
	// LocalTXID is the last transaction Litestream staged from the WAL
	// (0 before the first); ReplicaTXID the last one known to be on the
	// replica (0 when unknown, as after a failed sync).
	LocalTXID, ReplicaTXID uint64
	// ConsecutiveErrors counts failed replica operations (uploads,
	// listings, reads, deletes) since the last successful sync; 0 when
	// healthy.
	ConsecutiveErrors int
	// TotalErrors counts every failed replica operation since Start.
	TotalErrors int64
	// LastError is the last failure ("upload: …"), kept after recovery;
	// LastErrorAt is when it happened.
	LastError   string
	LastErrorAt time.Time
	// Stalled says why replication is stalled, "" when it is not: the
	// replica no longer follows the database although the lag may look
	// fine. It is set at once when the database file or its WAL is
	// removed or replaced while the database is open (the engine then
	// writes to a file no one else sees, and a restart or a restore loses
	// those commits); and when the WAL has been written but Litestream
	// has copied nothing from it for longer than Options.StallAfter, or
	// what it copied has not reached the replica for that long (the
	// replica unreachable, or Litestream unable to read the WAL). It is
	// checked every half SyncInterval and clears when replication moves
	// again.
	Stalled string
}

// Status returns the current state of replication. It does no I/O beyond
// reading Litestream's local staging directory listing (cached).
func (r *Replicator) Status() Status {
	now := time.Now()
	last := r.db.LastSuccessfulSyncAt()
	s := Status{Target: r.target.String(), SyncInterval: r.opts.SyncInterval, LastSync: last}
	if last.IsZero() {
		s.Lag = now.Sub(r.started)
	} else {
		s.Lag = now.Sub(last)
	}
	if pos, err := r.db.Pos(); err == nil {
		s.LocalTXID = uint64(pos.TXID)
	}
	s.ReplicaTXID = uint64(r.db.Replica.Pos().TXID)
	s.ConsecutiveErrors, s.TotalErrors, s.LastError, s.LastErrorAt = r.client.errorsSnapshot(last)
	r.stallMu.Lock()
	s.Stalled = r.stalled
	r.stallMu.Unlock()
	return s
}

// Path returns the absolute path of the replicated database.
func (r *Replicator) Path() string { return r.path }

// Target returns the replica.
func (r *Replicator) Target() Target { return r.target }
