package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/yella-go/yella/store"
)

// ErrReadOnly is returned by every write to a store opened with
// OpenReadOnly.
var ErrReadOnly = errors.New("the database is open read-only: nothing is written")

// ReadOnlyStore is a store.Store that only reads: every write (Admit,
// Claim, Update, Heartbeat, effects, rollups, Prune…) fails with
// ErrReadOnly before it reaches SQLite. Create it with OpenReadOnly.
type ReadOnlyStore struct {
	*Store
}

var _ store.Store = (*ReadOnlyStore)(nil)

// OpenReadOnly opens an existing database to look at it without changing
// it: it takes no engine lock (so it works while the owning process runs
// and holds the lock; WAL lets readers in from other processes), creates
// nothing, migrates nothing, and every connection is opened read-only
// (SQLite's mode=ro and query_only), so no write transaction can start and
// the owner's writer is never blocked. SQLite may create the empty -wal and
// -shm companion files a WAL reader needs when they are missing. Counts
// are read from the database at each call, so they follow the owner's
// writes. The database must be of this build's schema version: an older
// one must be opened read-write once to be migrated.
func OpenReadOnly(path string, opts Options) (*ReadOnlyStore, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlitestore: path must be a file path, got %q", path)
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s read-only: %w", path, err)
	}
	if st.Size() == 0 && !st.IsDir() {
		return nil, fmt.Errorf("sqlitestore: open %s read-only: the file is empty (no Yella database yet)", path)
	}
	if err := checkFile(path); err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s read-only: %w", path, err)
	}
	s := &Store{
		path: path, opts: opts, log: opts.Logger,
		cmds: make(chan *cmd), writerDone: make(chan struct{}),
		counts: map[store.Status]int64{}, active: map[string]int{}, live: map[string]bool{},
	}
	if err := s.openReadOnly(); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlitestore: open %s read-only: %w", path, err)
	}
	go s.refuseWrites()
	return &ReadOnlyStore{s}, nil
}

// readOnlyDSN opens path with SQLite's read-only flag and query_only: no
// journal_mode or synchronous pragma, which could try to write.
func readOnlyDSN(path string, o Options) string {
	return "file:" + path + "?mode=ro&_pragma=" + "busy_timeout(" + strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10) + ")" +
		"&_pragma=query_only(1)"
}

func (s *Store) openReadOnly() error {
	ctx := context.Background()
	var err error
	dsn := readOnlyDSN(s.path, s.opts)
	// The prepared statements of the writer are compiled on a read-only
	// connection too: compiling writes nothing, and refuseWrites never runs
	// them.
	if s.wdb, err = sql.Open(s.opts.Driver, dsn); err != nil {
		return err
	}
	s.wdb.SetMaxOpenConns(1)
	if s.conn, err = s.wdb.Conn(ctx); err != nil {
		return s.classify(err)
	}
	var version int
	if err := s.conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return s.classify(err)
	}
	switch want := SchemaVersion(); {
	case version > want:
		return fmt.Errorf("%w: schema version %d is newer than this build supports (%d); upgrade yella", ErrNewerSchema, version, want)
	case version == 0:
		return errors.New("not a Yella database (it has no Yella schema)")
	case version < want:
		return fmt.Errorf("schema version %d is older than this build's (%d): open it read-write once to migrate it", version, want)
	}
	if s.rdb, err = sql.Open(s.opts.Driver, dsn); err != nil {
		return err
	}
	s.rdb.SetMaxOpenConns(s.opts.ReadConns)
	s.rdb.SetMaxIdleConns(s.opts.ReadConns)
	if err := s.prepare(ctx); err != nil {
		return s.classify(err)
	}
	return s.loadCounts(ctx)
}

// refuseWrites stands in for the writer: it answers every command with
// ErrReadOnly without touching the database.
func (s *Store) refuseWrites() {
	defer close(s.writerDone)
	for c := range s.cmds {
		c.err = ErrReadOnly
		close(c.done)
	}
}

// Counts implements store.Store: read from the database at each call (the
// owner's writes do not pass through this store).
func (r *ReadOnlyStore) Counts(ctx context.Context) (map[store.Status]int64, error) {
	if err := r.readable(); err != nil {
		return nil, err
	}
	counts, err := countRuns(ctx, r.rdb)
	if err != nil {
		return nil, r.classify(err)
	}
	out := make(map[store.Status]int64, len(store.Statuses))
	for _, st := range store.Statuses {
		out[st] = 0
	}
	for st, n := range counts {
		out[st] += n
	}
	return out, nil
}
