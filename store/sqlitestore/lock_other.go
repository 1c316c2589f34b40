//go:build !unix

package sqlitestore

import "os"

// lockFile opens the lock file without locking: on this platform another
// engine process on the same database is not detected, and recovery waits
// for leases to expire.
func lockFile(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	return f, false, err
}

func unlockFile(f *os.File) error { return f.Close() }
