package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/yella-go/yella/prommetrics"
	"github.com/yella-go/yella/replicate"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// dbFacts is what serve found in the database before choosing the demo and
// the retention.
type dbFacts struct {
	created bool     // serve created the file now (or it was empty)
	runs    int64    // runs it holds
	foreign int64    // runs of processes the demo does not have
	names   []string // some of those processes
}

// own reports whether the database is serve's own: created for it, or
// holding only the demo's runs.
func (f dbFacts) own() bool { return f.created || f.foreign == 0 }

// demoDecision says whether the demo runs, and why.
func demoDecision(c *serveConfig, f dbFacts) (bool, string) {
	rate := fmt.Sprintf("on, %g events/s", c.demoRate)
	switch {
	case c.readOnly:
		return false, "off (read-only)"
	case c.demo.set && !c.demo.val:
		return false, "off (--demo=false)"
	case c.demo.set && f.foreign > 0:
		return true, rate + " (--demo), beside " + plural(int(f.foreign), "run", "runs") + " of other processes: it does not execute them, " +
			"but hands back (to idle) those left running by a process that is gone"
	case c.demo.set:
		return true, rate + " (--demo)"
	case f.created:
		return true, rate + ": a database created for it (--demo=false turns it off)"
	case f.foreign == 0:
		return true, rate + ": the database holds only the demo's runs (--demo=false turns it off)"
	}
	return false, fmt.Sprintf("off: the database holds %s of processes the demo does not have%s; --demo runs it there anyway",
		plural(int(f.foreign), "run", "runs"), nameList(f.names))
}

func nameList(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ", …)"
}

// retentionDecision is the retention serve applies, and why.
func retentionDecision(c *serveConfig, f dbFacts) (time.Duration, string) {
	switch {
	case c.readOnly:
		return 0, "off (read-only)"
	case flagGiven(c.fs.FlagSet, "retention") && c.retention == 0:
		return 0, "off (--retention 0): completed runs are kept"
	case flagGiven(c.fs.FlagSet, "retention"):
		return c.retention, fmt.Sprintf("completed runs are deleted %s after they complete (--retention)", shortDuration(c.retention))
	case f.own():
		return defaultRetention, fmt.Sprintf("completed runs are deleted %s after they complete: serve's own database (--retention 0 keeps them)", shortDuration(defaultRetention))
	}
	return 0, "off: the database holds other processes' runs, so completed runs are kept; --retention DURATION prunes them anyway"
}

// inspect counts the runs of st and those of processes the demo does not
// have, through the store contract.
func inspect(ctx context.Context, st store.Store, created bool) (dbFacts, error) {
	f := dbFacts{created: created}
	var err error
	if f.runs, err = st.CountRuns(ctx, store.RunFilter{}); err != nil {
		return f, err
	}
	demo := demoProcessNames()
	f.foreign = f.runs
	for _, p := range demo {
		n, err := st.CountRuns(ctx, store.RunFilter{Process: p})
		if err != nil {
			return f, err
		}
		f.foreign -= n
	}
	if f.foreign == 0 {
		return f, nil
	}
	sample, err := st.Runs(ctx, store.RunFilter{Order: store.NewestFirst, Limit: 1000})
	if err != nil {
		return f, err
	}
	seen := map[string]bool{}
	for _, p := range demo {
		seen[p] = true
	}
	for _, r := range sample {
		if !seen[r.Process] && len(f.names) < 5 {
			seen[r.Process] = true
			f.names = append(f.names, r.Process)
		}
	}
	return f, nil
}

// openStore opens the database for serve: a PostgreSQL schema shared with
// other servers, or a SQLite file read-only, or read-write with the engine
// lock (reporting whether the file was created now).
func (c *serveConfig) openStore(ctx context.Context, log *slog.Logger) (st store.Store, stats func() prommetrics.WriterStats, created bool, err error) {
	if c.pg {
		pg, schema, err := openPG(ctx, c.db, c.schema, false, log)
		if err != nil {
			return nil, nil, false, err
		}
		c.schema = schema
		return pg, func() prommetrics.WriterStats {
			st := pg.Stats()
			return prommetrics.WriterStats{Commits: st.Batches, Commands: st.Commands, Busy: time.Duration(st.CommitNanos), Deadlocks: st.Deadlocks}
		}, false, nil
	}
	st, sstats, created, err := c.openSQLite(log)
	if err != nil {
		return nil, nil, false, err
	}
	return st, func() prommetrics.WriterStats {
		st := sstats()
		return prommetrics.WriterStats{Commits: st.Batches, Commands: st.Commands, Busy: time.Duration(st.CommitNanos)}
	}, created, nil
}

// openSQLite opens a SQLite --db: read-only, or read-write with the engine
// lock (reporting whether the file was created now).
func (c *serveConfig) openSQLite(log *slog.Logger) (st store.Store, stats func() sqlitestore.Stats, created bool, err error) {
	if c.readOnly {
		ro, err := sqlitestore.OpenReadOnly(c.db, sqlitestore.Options{Logger: log})
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, false, fmt.Errorf("no database at %s (--read-only never creates one)", c.db)
		}
		if err != nil {
			return nil, nil, false, err
		}
		return ro, ro.Stats, false, nil
	}
	if fi, err := os.Stat(c.db); err != nil || fi.Size() == 0 {
		created = true
	}
	sopts := sqlitestore.Options{Synchronous: sqlitestore.Synchronous(c.sync), Logger: log}
	if c.replicate != "" {
		sopts.AutoCheckpoint = replicate.AutoCheckpoint // Litestream checkpoints once it has copied the WAL
	}
	rw, err := sqlitestore.Open(c.db, sopts)
	if errors.Is(err, sqlitestore.ErrLocked) {
		holder := "another process"
		if pid := lockHolder(c.db); pid > 0 {
			holder = fmt.Sprintf("process %d", pid)
		}
		return nil, nil, false, fmt.Errorf("%s is in use by %s, whose engine holds it (%s); yella serve --read-only looks at it without running anything",
			c.db, holder, lockPath(c.db))
	}
	if err != nil {
		return nil, nil, false, err
	}
	return rw, rw.Stats, created, nil
}

// facts is what serve needs to know of the database it opened: for a
// read-only look only its size.
func (c *serveConfig) facts(ctx context.Context, st store.Store, created bool) (dbFacts, error) {
	if !c.readOnly {
		return inspect(ctx, st, created)
	}
	counts, err := st.Counts(ctx)
	if err != nil {
		return dbFacts{}, err
	}
	var f dbFacts
	for _, n := range counts {
		f.runs += n
	}
	return f, nil
}
