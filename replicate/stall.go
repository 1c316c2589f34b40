package replicate

import (
	"fmt"
	"os"
	"slices"
	"time"
)

// A replication that has stopped moving can look healthy by its lag alone:
// Litestream records a successful sync whenever the replica holds every
// transaction it has staged, so when it cannot read the WAL any more (the
// WAL was deleted under the engine, say) it stages nothing new, its syncs
// of nothing succeed, and the lag stays at one interval while every commit
// since is lost to the replica. The watcher compares what happens to the
// files with what Litestream does instead:
//
//   - the database file or its WAL removed or replaced (a different file
//     at the path than the one the engine has open): stalled at once;
//   - the WAL written, but Litestream's local position (LocalTXID) not
//     moving for longer than StallAfter: commits are not being copied;
//   - a local position not reached by the replica (ReplicaTXID) for longer
//     than StallAfter: staged commits are not being uploaded.

// maxPending bounds the local positions the watcher remembers while the
// replica does not move (about an hour of observations at 1 s).
const maxPending = 8192

// observation is what the watcher sees at one poll.
type observation struct {
	now time.Time
	// dbGone and walGone say how the database file or its WAL differs from
	// the one the engine has open ("removed", "replaced"); "" if it does not.
	dbGone, walGone string
	// wal is the WAL file's size and modification time at the path.
	walSize int64
	walMod  time.Time
	// local and replica are Litestream's positions; localOK is false when
	// the local one could not be read.
	local, replica uint64
	localOK        bool
	// syncErr is Litestream's last error copying the WAL ("" after a
	// success); replicaErr the last failed replica operation while failing.
	syncErr, replicaErr string
}

// pendingTX is a local position not yet on the replica, and when the
// watcher first saw it.
type pendingTX struct {
	txid uint64
	seen time.Time
}

// stallWatch judges, from one observation after another, whether
// replication is stalled. It keeps no clock of its own and compares no file
// time with the wall clock: only observations with each other.
type stallWatch struct {
	path  string
	after time.Duration

	local         uint64
	walSize       int64     // the WAL's size and time when the local position last moved
	walMod        time.Time //
	unstagedSince time.Time // first observation of a WAL write after that; zero if none
	pending       []pendingTX
}

func newStallWatch(path string, after time.Duration, start observation) *stallWatch {
	return &stallWatch{path: path, after: after, local: start.local, walSize: start.walSize, walMod: start.walMod}
}

// observe takes one observation and returns why replication is stalled,
// or "".
func (w *stallWatch) observe(o observation) string {
	if o.localOK && o.local != w.local {
		if o.local < w.local {
			w.pending = nil // Litestream reset its local state
		}
		w.local, w.walSize, w.walMod, w.unstagedSince = o.local, o.walSize, o.walMod, time.Time{}
	} else if w.unstagedSince.IsZero() && (o.walSize != w.walSize || !o.walMod.Equal(w.walMod)) {
		w.unstagedSince = o.now // the WAL was written since Litestream last staged
	}
	if w.local > 0 && len(w.pending) < maxPending && (len(w.pending) == 0 || w.pending[len(w.pending)-1].txid < w.local) {
		w.pending = append(w.pending, pendingTX{w.local, o.now})
	}
	n := 0
	for n < len(w.pending) && w.pending[n].txid <= o.replica {
		n++
	}
	w.pending = slices.Delete(w.pending, 0, n)

	switch {
	case o.dbGone != "":
		return fmt.Sprintf("the database file %s was %s while replicating it: the engine's commits no longer reach that file or the replica", w.path, o.dbGone)
	case o.walGone != "":
		return fmt.Sprintf("the WAL file %s-wal was %s while the database was open (SQLite in another process deletes it on closing the database if no other process seems to hold the database): the engine's commits since are neither in the file on disk nor replicated", w.path, o.walGone)
	case !w.unstagedSince.IsZero() && o.now.Sub(w.unstagedSince) > w.after:
		return withCause(fmt.Sprintf("commits made %v ago have not been copied from the WAL for replication", o.now.Sub(w.unstagedSince).Round(time.Millisecond)), o.syncErr)
	case len(w.pending) > 0 && o.now.Sub(w.pending[0].seen) > w.after:
		return withCause(fmt.Sprintf("transactions staged %v ago have not reached the replica (local TXID %d, replica %d)", o.now.Sub(w.pending[0].seen).Round(time.Millisecond), w.local, o.replica), o.replicaErr)
	}
	return ""
}

func withCause(s, cause string) string {
	if cause == "" {
		return s
	}
	return s + "; last error: " + cause
}

// fileID is a file's identity, to tell whether the file at a path is still
// the one the engine opened.
type fileID struct{ fi os.FileInfo }

// sameAs reports how the file at path now differs from id: "" if it is
// the same file, "removed" or "replaced". A zero id (the file was not
// there when the watcher started) matches any file.
func (id fileID) sameAs(fi os.FileInfo, err error) string {
	switch {
	case id.fi == nil:
		return ""
	case err != nil:
		return "removed"
	case !os.SameFile(id.fi, fi):
		return "replaced"
	}
	return ""
}

// observe looks at the files and at Litestream. Only the watcher calls it
// (and Start, before the watcher runs).
func (r *Replicator) observe() observation {
	o := observation{now: time.Now()}
	fi, err := os.Stat(r.path)
	o.dbGone = r.dbID.sameAs(fi, err)
	wfi, werr := os.Stat(r.path + "-wal")
	if r.walID.fi == nil && werr == nil {
		r.walID = fileID{wfi} // the WAL appeared: it is the one the connections use
	}
	o.walGone = r.walID.sameAs(wfi, werr)
	if werr == nil {
		o.walSize, o.walMod = wfi.Size(), wfi.ModTime()
	}
	if pos, err := r.db.Pos(); err == nil {
		o.local, o.localOK = uint64(pos.TXID), true
	}
	o.replica = uint64(r.db.Replica.Pos().TXID)
	if d := r.db.SyncDiagnostic(); !d.Active {
		r.syncErr = d.Error // Litestream clears it when a sync starts
	}
	o.syncErr = r.syncErr
	if n, _, last, _ := r.client.errorsSnapshot(r.db.LastSuccessfulSyncAt()); n > 0 {
		o.replicaErr = last
	}
	return o
}

// watchLoop polls every half SyncInterval until stop closes.
func (r *Replicator) watchLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(max(r.opts.SyncInterval/2, 5*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s := r.stall.observe(r.observe())
		r.stallMu.Lock()
		was := r.stalled
		r.stalled = s
		r.stallMu.Unlock()
		switch {
		case s != "" && was == "":
			r.log.Error("replication stalled", "reason", s)
		case s == "" && was != "":
			r.log.Info("replication no longer stalled")
		}
	}
}
