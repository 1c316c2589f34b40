//go:build linux

package replicate

import (
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// SQLite's lock bytes (its file format, "the lock-byte page"): a connection
// holding a SHARED lock on the database holds a read lock on the shared
// range, and one taking EXCLUSIVE needs a write lock on all of it. In WAL
// mode every open connection holds SHARED, and the last one to close takes
// EXCLUSIVE to checkpoint and delete the WAL.
const (
	sqlitePendingByte = 0x40000000
	sqliteSharedFirst = sqlitePendingByte + 2
	sqliteSharedSize  = 510
)

// holdShared opens the database at path and takes a read lock on SQLite's
// shared range as an open file description lock, which stands for this
// process as a SHARED lock in every other process's eyes. Unlike SQLite's
// own (traditional POSIX) locks, it is not dropped when some other
// descriptor of the file in this process is closed, as Litestream does
// with its own descriptor of the database whenever its setup fails (an
// unreachable replica at start, for instance). So while it is held no
// other process can take EXCLUSIVE, and none deletes the WAL the store
// writes when it closes the database.
//
// The returned file must stay open until no SQLite connection of this
// process has the database open: closing it drops those connections' locks
// too. It is returned even when locking failed, so that the caller does
// not close it early.
func holdShared(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart, Start: sqliteSharedFirst, Len: sqliteSharedSize}
	// Another process holds EXCLUSIVE only for an instant (a checkpoint at
	// close); wait a little for it rather than block.
	for i := 0; ; i++ {
		err = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		if err == nil || i == 50 || !(errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES)) {
			return f, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// releaseShared releases the lock holdShared took, without closing f.
func releaseShared(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart, Start: sqliteSharedFirst, Len: sqliteSharedSize}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}
