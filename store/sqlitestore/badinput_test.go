package sqlitestore_test

import (
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/yella-go/yella/store/sqlitestore"
)

// Each bad input gives a clear error and leaves the file as it was.
func TestOpenBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A database of a newer schema.
	newer := filepath.Join(dir, "newer.db")
	st, err := sqlitestore.Open(newer, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	raw, _ := sql.Open("sqlite", newer)
	raw.Exec("PRAGMA user_version = 99")
	raw.Close()
	// A file with an SQLite header and garbage after it.
	garbage := append([]byte("SQLite format 3\x00"), []byte(strings.Repeat("\xff\x13", 2048))...)

	cases := []struct {
		name string
		path string
		opts sqlitestore.Options
		want error
		msg  string
	}{
		{"not a database", write("notes.txt", []byte("hello, this is a text file\n")), sqlitestore.Options{}, sqlitestore.ErrNotDatabase, "not an SQLite database"},
		{"corrupt header", write("corrupt.db", garbage), sqlitestore.Options{}, nil, "not a database"},
		{"newer schema", newer, sqlitestore.Options{}, sqlitestore.ErrNewerSchema, "schema version 99 is newer than this build supports"},
		{"missing directory", filepath.Join(dir, "no", "such", "dir", "y.db"), sqlitestore.Options{}, nil, "no such file or directory"},
		{"a directory", dir, sqlitestore.Options{}, nil, "is a directory"},
		{"memory path", ":memory:", sqlitestore.Options{}, nil, "use store/memstore"},
		{"bad synchronous", filepath.Join(dir, "x.db"), sqlitestore.Options{Synchronous: "SOMETIMES"}, nil, "Synchronous must be NORMAL or FULL"},
		{"bad page size", filepath.Join(dir, "x.db"), sqlitestore.Options{PageSize: 1000}, nil, "PageSize must be a power of two"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, _ := os.ReadFile(c.path)
			st, err := sqlitestore.Open(c.path, c.opts)
			if err == nil {
				st.Close()
				t.Fatal("opened")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("error %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not say %q", err, c.msg)
			}
			if after, _ := os.ReadFile(c.path); string(after) != string(before) {
				t.Error("the file was changed")
			}
		})
	}
}

// A second engine on an open database is refused while the first holds it,
// and admitted once it is closed.
func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "y.db")
	a, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sqlitestore.Open(path, sqlitestore.Options{})
	if !errors.Is(err, sqlitestore.ErrLocked) || !strings.Contains(err.Error(), "held by pid") {
		t.Fatalf("second open: %v", err)
	}
	a.Close()
	b, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	b.Close()
}

// A read-only directory cannot hold the database: the error says so. Root
// ignores permissions, so the test mounts a read-only tmpfs when it can.
func TestOpenReadOnlyDirectory(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o555)
	if os.Geteuid() == 0 {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", ro).CombinedOutput(); err != nil {
			t.Skipf("running as root and cannot mount a read-only tmpfs: %v %s", err, out)
		}
		defer syscall.Unmount(ro, 0)
	}
	_, err := sqlitestore.Open(filepath.Join(ro, "y.db"), sqlitestore.Options{})
	if err == nil {
		t.Fatal("opened a database in a read-only directory")
	}
	if !strings.Contains(err.Error(), "read-only") && !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("error %q does not say the directory is read-only", err)
	}
}
