package replicate

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/benbjohnson/litestream"
	_ "modernc.org/sqlite" // the driver Litestream links; the integrity check uses it

	"github.com/yella-go/yella/store/sqlitestore"
)

// Errors returned by Restore.
var (
	// ErrTargetExists: the restore destination (or a WAL file of it) exists
	// and RestoreOptions.Force is not set. Nothing was changed.
	ErrTargetExists = errors.New("restore destination exists")
	// ErrEmptyReplica: the replica holds nothing to restore (nothing was
	// ever replicated there, the URL points at the wrong place, or nothing
	// is as old as RestoreOptions.Timestamp). Nothing was changed.
	ErrEmptyReplica = errors.New("replica holds no database to restore")
	// ErrIntegrity: the restored file failed PRAGMA integrity_check. It was
	// deleted; the destination was not changed.
	ErrIntegrity = errors.New("restored database failed integrity_check")
	// ErrInUse: an engine process has the destination open (it holds the
	// store's lock file), or this process replicates it. Nothing was
	// changed.
	ErrInUse = errors.New("restore destination is in use by a running engine")
)

// RestoreOptions configures Restore. The zero value restores the latest
// state into a path that must not exist.
type RestoreOptions struct {
	// Force replaces an existing destination. The replacement is atomic:
	// the replica is restored and checked into a temporary file in the same
	// directory, the destination's stale -wal and -shm files are removed
	// (SQLite would otherwise replay the old WAL into the new file), and the
	// temporary file is renamed over the destination.
	Force bool
	// Timestamp restores the database as it was at that time (point in
	// time): the last state replicated before it. Zero means the latest.
	// The history kept covers Litestream's retention (24 h by default).
	Timestamp time.Time
	// Logger receives the replica client's logs. Defaults to discarding.
	Logger *slog.Logger
}

// Restore restores the database replicated at target into the file to.
//
// It refuses (ErrTargetExists, nothing changed) if to, or to-wal, exists
// unless opts.Force; and refuses (ErrInUse) while an engine has to open,
// or this process replicates it, Force or not. The restored file must pass PRAGMA integrity_check before it
// is moved into place (ErrIntegrity otherwise). A replica with nothing in it
// gives ErrEmptyReplica. The restored database is a consistent prefix of
// the replicated history; see the package documentation for what it can
// lose. Litestream's local staging directory beside to (.<name>-litestream),
// if one is left from an earlier replication of that path, is not touched:
// Litestream reconciles it with the replica when replication starts again.
func Restore(ctx context.Context, target Target, to string, opts RestoreOptions) error {
	if to == "" {
		return errors.New("replicate: restore destination is empty")
	}
	to, err := filepath.Abs(to)
	if err != nil {
		return fmt.Errorf("replicate: %w", err)
	}
	client, err := target.newClient()
	if err != nil {
		return fmt.Errorf("replicate: %w", err)
	}
	if err := checkDestination(to, opts.Force); err != nil {
		return fmt.Errorf("replicate: restore to %s: %w", to, err)
	}
	activeMu.Lock()
	replicating := active[to]
	activeMu.Unlock()
	if replicating {
		// Litestream has the file open: replacing it and removing its WAL
		// would pull them from under that connection.
		return fmt.Errorf("replicate: restore to %s: %w (this process replicates it): Close the Replicator first", to, ErrInUse)
	}
	unlock, err := sqlitestore.LockEngine(to)
	if errors.Is(err, sqlitestore.ErrLocked) {
		return fmt.Errorf("replicate: restore to %s: %w (%v): stop that engine first", to, ErrInUse, err)
	}
	if err != nil {
		return fmt.Errorf("replicate: restore to %s: %w", to, err)
	}
	defer unlock()
	if err := checkDestination(to, opts.Force); err != nil { // again, under the lock
		return fmt.Errorf("replicate: restore to %s: %w", to, err)
	}

	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	client.SetLogger(logger)
	if err := client.Init(ctx); err != nil {
		return fmt.Errorf("replicate: restore from %s: %w", target, explain(err))
	}
	tmp, err := tempPath(to)
	if err != nil {
		return fmt.Errorf("replicate: %w", err)
	}
	defer removeDB(tmp)
	r := litestream.NewReplicaWithClient(nil, client)
	lo := litestream.NewRestoreOptions()
	lo.OutputPath = tmp
	lo.Timestamp = opts.Timestamp
	lo.IntegrityCheck = litestream.IntegrityCheckNone // the full check below
	if err := r.Restore(ctx, lo); err != nil {
		if errors.Is(err, litestream.ErrTxNotAvailable) || errors.Is(err, litestream.ErrNoSnapshots) ||
			(!opts.Timestamp.IsZero() && strings.Contains(err.Error(), "no backups found")) {
			what := "nothing has been replicated there (or the URL points at the wrong place)"
			if !opts.Timestamp.IsZero() {
				what = "nothing was replicated there at or before " + opts.Timestamp.UTC().Format(time.RFC3339)
			}
			return fmt.Errorf("replicate: restore from %s: %w: %s", target, ErrEmptyReplica, what)
		}
		return fmt.Errorf("replicate: restore from %s: %w", target, err)
	}
	if err := integrityCheck(ctx, tmp); err != nil {
		return fmt.Errorf("replicate: restore from %s: %w", target, err)
	}
	// Stale WAL and shared-memory files of the file being replaced go first:
	// next to the new file, SQLite would replay that WAL into it.
	for _, p := range []string{to + "-wal", to + "-shm", to + "-journal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("replicate: restore to %s: remove stale %s: %w", to, p, err)
		}
	}
	if err := os.Rename(tmp, to); err != nil {
		return fmt.Errorf("replicate: restore to %s: %w", to, err)
	}
	return syncDir(filepath.Dir(to))
}

// checkDestination refuses an existing destination without force, and a
// directory always. A WAL file without its database counts as existing: it
// may hold the only copy of recent commits, and it would be replayed into
// the restored file.
func checkDestination(to string, force bool) error {
	st, err := os.Stat(to)
	switch {
	case err == nil && st.IsDir():
		return fmt.Errorf("%w: it is a directory", ErrTargetExists)
	case err == nil && !force:
		return fmt.Errorf("%w: refusing to overwrite it (use Force to replace it)", ErrTargetExists)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return err
	}
	if _, err := os.Stat(to + "-wal"); err == nil && !force {
		return fmt.Errorf("%w: %s-wal exists without its database; it may hold commits (use Force to discard it)", ErrTargetExists, to)
	}
	dir := filepath.Dir(to)
	if st, err := os.Stat(dir); err != nil {
		return fmt.Errorf("destination directory: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("destination directory %s is not a directory", dir)
	}
	return nil
}

// tempPath is a fresh name beside to, so the final rename stays in one
// directory (and one file system) and is atomic.
func tempPath(to string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(to), "."+filepath.Base(to)+".restore-"+hex.EncodeToString(b[:])), nil
}

func removeDB(p string) {
	for _, s := range []string{"", "-wal", "-shm", ".tmp"} {
		os.Remove(p + s)
	}
}

// integrityCheck runs PRAGMA integrity_check (the full check, not
// quick_check) on the restored file.
func integrityCheck(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer func() {
		db.Close()
		os.Remove(path + "-wal") // the check wrote nothing; SQLite may leave them
		os.Remove(path + "-shm")
	}()
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrIntegrity, err)
	}
	defer rows.Close()
	var msgs []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return fmt.Errorf("%w: %v", ErrIntegrity, err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrIntegrity, err)
	}
	if len(msgs) != 1 || msgs[0] != "ok" {
		var lines []string
		for _, m := range msgs {
			lines = append(lines, strings.Split(strings.TrimSpace(m), "\n")...)
		}
		if len(lines) > 6 {
			lines = append(lines[:6], fmt.Sprintf("… %d more", len(lines)-6))
		}
		return fmt.Errorf("%w: %s", ErrIntegrity, strings.Join(lines, "; "))
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("replicate: sync directory %s: %w", dir, err)
	}
	return nil
}
