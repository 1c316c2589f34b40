//go:build !linux

package replicate

import (
	"errors"
	"os"
)

// holdShared needs open file description locks, which only Linux has:
// elsewhere a failed Litestream setup (which closes a descriptor of the
// database, dropping this process's SQLite locks) can let another process
// that opens and closes the database delete its WAL.
func holdShared(path string) (*os.File, error) {
	return nil, errors.New("open file description locks are not available on this platform")
}

func releaseShared(f *os.File) error { return nil }
