// Package commithook lets tests inside this module stop the SQLite store's
// writer right before it commits a batch: to hold the commit (proving that
// no caller is answered before its transaction commits), to fail it, or to
// kill the process at that point (the crash tests). It is internal, so
// users of the module cannot reach it, and nothing but tests sets it; when
// unset, the writer pays one atomic load per commit.
package commithook

import "sync/atomic"

// Func is called by the writer of the store whose database file is db,
// inside the batch's transaction, right before COMMIT. A non-nil error
// rolls the transaction back and fails the batch as a failed COMMIT would
// (the writer then retries each command alone, calling Func again).
type Func func(db string) error

var hook atomic.Pointer[Func]

// Set installs f for every store in the process (nil removes it) and
// returns a function that restores the previous hook. Tests that set it
// must not run in parallel with other tests that open stores, or must
// filter on db.
func Set(f Func) (restore func()) {
	var p *Func
	if f != nil {
		p = &f
	}
	prev := hook.Swap(p)
	return func() { hook.Store(prev) }
}

// Installed reports whether a hook is installed. A writer that can send
// COMMIT in the round trip of its batch's statements (pgstore's) sends it
// on its own while one is, so that the hook runs as Func says: after the
// statements, inside the transaction.
func Installed() bool { return hook.Load() != nil }

// BeforeCommit runs the installed hook, if any, for the store of db.
func BeforeCommit(db string) error {
	if f := hook.Load(); f != nil {
		return (*f)(db)
	}
	return nil
}
