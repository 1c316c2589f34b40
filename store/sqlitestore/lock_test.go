package sqlitestore_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

// A second Open of a database this process already has open is refused
// (ErrLocked) without opening the database file: closing any descriptor of
// a file drops every POSIX lock the process holds on it, the first store's
// SQLite locks included, and an sqlite3 shell that then opened and closed
// the database deleted the WAL that store was writing. The shell, run by
// another process after the refused Open, must leave the WAL in place and
// see every run the first store committed.
func TestSecondOpenKeepsTheFirstStoresLocks(t *testing.T) {
	bin, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("the sqlite3 command-line shell is not installed (Debian: apt-get install sqlite3): this test runs it as another process")
	}
	path := filepath.Join(t.TempDir(), "app.db")
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register(yella.Process{Name: "job", On: "job", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(t.Context())
	wal := func() uint64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			return 0
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	first := wal()
	for i := range 3 {
		if _, err := sqlitestore.Open(path, sqlitestore.Options{}); !errors.Is(err, sqlitestore.ErrLocked) {
			t.Fatalf("second Open: %v, want ErrLocked", err)
		}
		for range 10 {
			if _, err := eng.Emit(t.Context(), "job", nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := eng.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "-cmd", ".timeout 5000", path, "SELECT count(*) FROM runs WHERE status = 'completed'").CombinedOutput()
		if err != nil {
			t.Fatalf("sqlite3: %v: %s", err, out)
		}
		if got := wal(); got != first {
			t.Fatalf("after sqlite3 run %d closed the database, the WAL file is inode %d (0: deleted), the store's is %d", i, got, first)
		}
		if got, want := strings.TrimSpace(string(out)), strconv.Itoa(10*(i+1)); got != want {
			t.Fatalf("sqlite3 run %d sees %s completed runs in the file, the store committed %s", i, got, want)
		}
	}
}
