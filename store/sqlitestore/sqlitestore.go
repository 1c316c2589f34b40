// Package sqlitestore is the default store.Store: one local SQLite file in
// WAL mode, written by a single goroutine with group commit.
//
// Every write is a command sent to one writer goroutine that owns the only
// write connection. It takes everything queued (up to Options.MaxBatch),
// runs it in one BEGIN IMMEDIATE transaction, commits once, then answers
// the callers. Reads use a separate small pool of query_only connections.
// There is one writer connection and every write transaction takes the
// write lock at BEGIN, so SQLITE_BUSY cannot arise inside the engine.
//
// A process holds an exclusive lock file (<path>.lock) while the store is
// open. That proves that any lease held by an owner this process has not
// seen belongs to a dead process: a fresh engine reclaims such runs at once
// instead of waiting for their leases to expire.
//
// Durability: with Synchronous NORMAL (the default) a committed write
// survives the process crashing (kill -9); the last commits before an OS
// crash or power loss may be lost. FULL also survives power loss, at the
// cost of an fsync per commit (amortised by group commit).
package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"

	"github.com/yella-go/yella/store"
)

// Errors returned by Open.
var (
	// ErrLocked: another process has the database open for an engine.
	ErrLocked = errors.New("database is in use by another engine process")
	// ErrNotDatabase: the file exists but is not an SQLite database.
	ErrNotDatabase = errors.New("file is not an SQLite database")
	// ErrNewerSchema: the database was created by a newer version.
	ErrNewerSchema = errors.New("database schema is newer than this build")
)

// Synchronous is SQLite's durability mode for commits in WAL mode.
type Synchronous string

// Durability modes.
const (
	// Normal survives a crash of the process; an OS crash or power loss may
	// lose the last commits. The default.
	Normal Synchronous = "NORMAL"
	// Full also survives power loss: every commit is fsynced.
	Full Synchronous = "FULL"
)

// Options configures a Store. The zero value means defaults.
type Options struct {
	// Synchronous is the durability mode. Defaults to Normal.
	Synchronous Synchronous
	// BusyTimeout bounds how long a connection waits for a lock held by
	// another process (a backup tool, a CLI). Defaults to 5s.
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool. Defaults to 2: on a 2-core
	// machine more readers only add writer tail latency.
	ReadConns int
	// MaxBatch bounds the commands committed in one transaction. Defaults
	// to 256.
	MaxBatch int
	// PageSize is the page size of a new database file (existing files keep
	// theirs). Every commit writes each page it changed to the WAL, so
	// smaller pages write fewer bytes per run; larger pages read and write
	// large payloads (tens of KB) faster. Defaults to 2048 (measured: about
	// 6 KB written per no-op run against 9 KB at 4096, with equal
	// throughput for small payloads).
	PageSize int
	// AutoCheckpoint is the WAL size, in pages, past which a commit runs a
	// PASSIVE checkpoint (SQLite's wal_autocheckpoint). 0 keeps SQLite's
	// default of 1000 pages; negative is refused. While Litestream replicates the file
	// (package replicate) it checkpoints the WAL itself, PASSIVE at 1000
	// pages once it has copied the frames; open the store with
	// replicate.AutoCheckpoint (10000) then, so that the writer's own
	// checkpoints, which Litestream's read transaction stops short anyway,
	// are only a backstop: they bound the WAL while Litestream has not
	// taken over the file (a replica unreachable at start).
	AutoCheckpoint int
	// WALLimit bounds the WAL file, in bytes. PASSIVE checkpoints copy
	// frames into the database but cannot start the WAL over while readers
	// keep using it, so steady reads (a dashboard, a backup tool holding a
	// read transaction for a second at a time) under steady writes let the
	// file grow without bound. Past WALLimit the writer runs a TRUNCATE
	// checkpoint, waiting at most one second for the readers in progress
	// (new ones are not held up), then truncates the file; if readers
	// still hold it, it tries again later, waiting longer between tries
	// (up to 30 s), so a reader that never lets go costs the writer at
	// most a one-second pause every 30 s. Defaults to 32 MiB; negative
	// turns it off. It is off by default when AutoCheckpoint is set: a
	// replicated store's checkpoints belong to Litestream, which a
	// TRUNCATE checkpoint would race.
	WALLimit int64
	// Logger receives the store's logs. Defaults to discarding them.
	Logger *slog.Logger
	// Driver is the database/sql driver name the store opens the file
	// with. Defaults to "sqlite": modernc.org/sqlite, linked into this
	// package, the driver the store is built and measured on. Another
	// driver must accept "file:" URIs with the _pragma and _txlock
	// parameters; its errors are passed on unclassified. The trust suite
	// uses this to run the store over a VFS that simulates power loss.
	Driver string
}

// Stats describes the writer's work since Open.
type Stats struct {
	Batches     int64 // transactions committed
	Commands    int64 // commands committed in them
	CommitNanos int64 // total time spent in those transactions
	// MergedClaims counts the claims committed that shared one statement
	// with the other claims of their transaction.
	MergedClaims int64
	// MergedEnds counts the attempt ends committed that shared one
	// statement with the other attempt ends of their transaction.
	MergedEnds int64
}

// Store is a SQLite store.Store. Create it with Open.
type Store struct {
	path      string
	opts      Options
	log       *slog.Logger
	lock      *os.File
	exclusive bool

	wdb  *sql.DB
	conn *sql.Conn // the writer's connection
	rdb  *sql.DB

	cmds       chan *cmd
	writerDone chan struct{}
	closeMu    sync.RWMutex
	closed     bool

	mu     sync.Mutex
	counts map[store.Status]int64
	active map[string]int  // idle+running runs per process, for the processes counted so far
	live   map[string]bool // lease owners seen in this process
	seq    int64           // the last run seq (the writer assigns them)
	stats  Stats

	// pruneFrom is where retention reads on (Prune): the writer's own,
	// and only a hint (a run it skips is read in the next pass).
	pruneFrom int64

	begin, commit, rollback *sql.Stmt
	st                      stmts
	// many holds the merged statements, prepared on the writer's driver
	// connection, by kind and log2 of their rows (manyStmt); nv and row
	// are their bound values and the row they read (raw.go). Only the
	// writer uses them.
	many [manyKinds][8]driver.Stmt
	nv   []driver.NamedValue
	row  valueRow
	bufs writerBufs
	// sqlOf is the text of each statement prepared on the writer's
	// connection (prepare); raw holds those prepared again on its driver
	// connection (exec). Only the writer uses raw.
	sqlOf map[*sql.Stmt]string
	raw   map[*sql.Stmt]driver.Stmt
	// claimed holds the runs this writer claimed, by id, as each claim
	// left its row (see remember); only the writer uses it.
	claimed map[string]claimedRun
	// fresh holds the runs this writer admitted last, each in the slot of
	// its seq, as their admissions wrote them (see keepFresh); claiming
	// reports that the writer has claimed a run. Only the writer uses
	// them.
	fresh      []freshRun
	freshNames freshNames
	freshSeed  maphash.Seed
	claiming   bool
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.EffectQueue = (*Store)(nil)
)

func (o Options) withDefaults() (Options, error) {
	switch strings.ToUpper(string(o.Synchronous)) {
	case "":
		o.Synchronous = Normal
	case string(Normal), string(Full):
		o.Synchronous = Synchronous(strings.ToUpper(string(o.Synchronous)))
	default:
		return o, fmt.Errorf("sqlitestore: Options.Synchronous must be NORMAL or FULL, got %q", o.Synchronous)
	}
	if o.BusyTimeout < 0 || o.ReadConns < 0 || o.MaxBatch < 0 || o.AutoCheckpoint < 0 {
		return o, errors.New("sqlitestore: Options.BusyTimeout, ReadConns, MaxBatch and AutoCheckpoint must not be negative")
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.ReadConns == 0 {
		o.ReadConns = 2
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 256
	}
	if o.PageSize == 0 {
		o.PageSize = 2048
	}
	if o.PageSize < 512 || o.PageSize > 65536 || o.PageSize&(o.PageSize-1) != 0 {
		return o, fmt.Errorf("sqlitestore: Options.PageSize must be a power of two from 512 to 65536, got %d", o.PageSize)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Driver == "" {
		o.Driver = "sqlite"
	}
	switch {
	case o.WALLimit < 0:
		o.WALLimit = 0 // off
	case o.WALLimit == 0 && o.AutoCheckpoint == 0:
		o.WALLimit = DefaultWALLimit
	}
	return o, nil
}

// DefaultWALLimit is Options.WALLimit's default.
const DefaultWALLimit = 32 << 20

func dsn(path string, o Options, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+string(o.Synchronous)+")")
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
		if o.AutoCheckpoint > 0 {
			q.Add("_pragma", "wal_autocheckpoint("+strconv.Itoa(o.AutoCheckpoint)+")")
		}
	}
	return "file:" + path + "?" + q.Encode()
}

// checkPath refuses a path that is a directory. It only stats the path:
// it runs before the engine lock, and opening the file could drop this
// process's locks on it (see checkFile).
func checkPath(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	return nil
}

// checkFile refuses a path that exists but is not an SQLite database,
// before SQLite gets to touch it. It reads the file through a descriptor of
// its own, and closing any descriptor of a file drops every POSIX lock the
// process holds on it, SQLite's included: with them gone, another process
// that opens and closes the database (an sqlite3 shell) deletes the WAL the
// engine is writing. So Open calls it only under the engine lock, which
// proves that no store of this process has the database open.
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	if st.Size() == 0 {
		return nil
	}
	head := make([]byte, 16)
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, []byte("SQLite format 3\x00")) {
		return fmt.Errorf("%w: %s", ErrNotDatabase, path)
	}
	return nil
}

// Open opens (creating if needed) the database at path, migrates it, takes
// the engine lock and starts the writer.
func Open(path string, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlitestore: path must be a file path, got %q (use store/memstore for an in-memory store)", path)
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, err
	}
	if err := checkPath(path); err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	lock, exclusive, err := lockFile(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	if err := checkFile(path); err != nil {
		unlockFile(lock)
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	s := &Store{
		path: path, opts: opts, log: opts.Logger, lock: lock, exclusive: exclusive,
		cmds: make(chan *cmd, 4*opts.MaxBatch), writerDone: make(chan struct{}),
		counts: map[store.Status]int64{}, active: map[string]int{}, live: map[string]bool{},
		freshSeed: maphash.MakeSeed(),
	}
	if err := s.open(); err != nil {
		s.closeDBs()
		unlockFile(lock)
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	go s.writer()
	return s, nil
}

// create initialises a new database file: the page size can only be set
// before the first write, and the DSN applies journal_mode first.
func (s *Store) create() error {
	if st, err := os.Stat(s.path); err == nil && st.Size() > 0 {
		return nil
	}
	db, err := sql.Open(s.opts.Driver, "file:"+s.path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(fmt.Sprintf("PRAGMA page_size = %d; PRAGMA journal_mode = WAL", s.opts.PageSize))
	return s.classify(err)
}

func (s *Store) open() error {
	ctx := context.Background()
	if err := s.create(); err != nil {
		return err
	}
	var err error
	if s.wdb, err = sql.Open(s.opts.Driver, dsn(s.path, s.opts, false)); err != nil {
		return err
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetConnMaxIdleTime(0)
	if s.conn, err = s.wdb.Conn(ctx); err != nil {
		return s.classify(err)
	}
	if err := s.verifyPragmas(ctx); err != nil {
		return err
	}
	if err := migrate(ctx, s.conn); err != nil {
		return s.classify(err)
	}
	if s.rdb, err = sql.Open(s.opts.Driver, dsn(s.path, s.opts, true)); err != nil {
		return err
	}
	s.rdb.SetMaxOpenConns(s.opts.ReadConns)
	s.rdb.SetMaxIdleConns(s.opts.ReadConns)
	if err := s.prepare(ctx); err != nil {
		return s.classify(err)
	}
	return s.loadCounts(ctx)
}

// verifyPragmas checks that the DSN's settings took effect: WAL and the
// requested synchronous mode are what the durability claims rest on.
func (s *Store) verifyPragmas(ctx context.Context) error {
	var mode string
	if err := s.conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return s.classify(err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %s, want wal (is the directory writable?)", mode)
	}
	var sync int
	if err := s.conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return s.classify(err)
	}
	want := map[Synchronous]int{Normal: 1, Full: 2}[s.opts.Synchronous]
	if sync != want {
		return fmt.Errorf("synchronous is %d, want %d (%s)", sync, want, s.opts.Synchronous)
	}
	return nil
}

func (s *Store) loadCounts(ctx context.Context) error {
	if err := s.rdb.QueryRowContext(ctx, "SELECT coalesce(max(seq), 0) FROM runs").Scan(&s.seq); err != nil {
		return s.classify(err)
	}
	// Per-process active counts are read lazily (wtx.active).
	counts, err := countRuns(ctx, s.rdb)
	if err != nil {
		return s.classify(err)
	}
	for st, n := range counts {
		s.counts[st] += n
	}
	return nil
}

// countRuns counts the runs of each status: those the status index holds
// by a covering scan of it, and the completed ones (which it does not
// hold) as the rest of the table. Both reads are in one transaction, so
// they see the same runs.
func countRuns(ctx context.Context, db *sql.DB) (map[store.Status]int64, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var total int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM runs").Scan(&total); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT status, count(*) FROM runs INDEXED BY runs_status WHERE "+inFlight+" GROUP BY status")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[store.Status]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[store.Status(st)] += n
		total -= n
	}
	out[store.StatusCompleted] += total
	return out, rows.Err()
}

// classify makes SQLite errors say what went wrong in operator terms.
func (s *Store) classify(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case 13: // SQLITE_FULL
		return fmt.Errorf("disk full writing %s: %w", s.path, err)
	case 26: // SQLITE_NOTADB
		return fmt.Errorf("%w: %v", ErrNotDatabase, err)
	case 11: // SQLITE_CORRUPT
		return fmt.Errorf("database %s is corrupt: %w", s.path, err)
	case 8: // SQLITE_READONLY
		return fmt.Errorf("database %s is read-only (check file and directory permissions): %w", s.path, err)
	case 14: // SQLITE_CANTOPEN
		return fmt.Errorf("cannot open %s (does the directory exist and is it writable?): %w", s.path, err)
	case 10: // SQLITE_IOERR
		return fmt.Errorf("I/O error on %s: %w", s.path, err)
	}
	return err
}

// LockEngine takes the engine lock that Open holds while a database is
// open (an exclusive advisory lock on <dbPath>.lock), for tools that must
// keep engines off the file, such as a restore that replaces it. It fails
// with ErrLocked while an engine process has the database open. Where the
// platform has no advisory locks it locks nothing, as Open does.
func LockEngine(dbPath string) (unlock func() error, err error) {
	f, _, err := lockFile(dbPath + ".lock")
	if err != nil {
		return nil, err
	}
	return func() error { return unlockFile(f) }, nil
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Stats returns the writer's statistics.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close waits for queued writes, stops the writer, closes the database and
// releases the engine lock. Calls after Close return store.ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	close(s.cmds)
	s.closeMu.Unlock()
	<-s.writerDone
	err := s.closeDBs()
	if s.lock != nil {
		unlockFile(s.lock)
	}
	return err
}

func (s *Store) closeDBs() error {
	var errs []error
	for _, st := range s.st.all() {
		if st != nil {
			st.Close()
		}
	}
	if s.conn != nil {
		// Closed on the connection they were prepared on, before it is.
		s.conn.Raw(func(any) error {
			for _, st := range s.raw {
				st.Close()
			}
			for _, sts := range s.many {
				for _, st := range sts {
					if st != nil {
						st.Close()
					}
				}
			}
			return nil
		})
	}
	for _, st := range []*sql.Stmt{s.begin, s.commit, s.rollback} {
		if st != nil {
			st.Close()
		}
	}
	if s.conn != nil {
		errs = append(errs, s.conn.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	return errors.Join(errs...)
}

func (s *Store) readable() error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	return nil
}
