//go:build linux

package browser

import (
	"os"
	"path/filepath"
	"testing"
)

// A pool removes the user data directories that processes which died
// without removing them left in its TempDir, and nothing else: not a live
// process's directory (its lock is held), not a directory without a lock
// file, not a directory of another name.
func TestStaleDirsSwept(t *testing.T) {
	tmp := t.TempDir()
	mk := func(name string) string {
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(d, "Default", "Cache"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "Default", "Cache", "index"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	owned := func(name string) (string, *os.File) {
		d := mk(name)
		f, err := ownDir(d)
		if err != nil {
			t.Fatal(err)
		}
		return d, f
	}
	dead, f := owned("yella-browser-dead")
	f.Close() // its process is gone: the kernel released the lock
	dead2, f2 := owned("yella-browser-dead2")
	f2.Close()
	live, lf := owned("yella-browser-live")
	defer lf.Close()
	unlocked := mk("yella-browser-nolock")
	other, of := owned("other-dir")
	of.Close()

	p, err := New(Config{TempDir: tmp, ExecPath: "/bin/false"})
	if err != nil {
		t.Fatal(err)
	}
	p.Close() // waits for the sweep
	for _, d := range []string{dead, dead2} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s of a dead process: %v, want removed", filepath.Base(d), err)
		}
	}
	for _, d := range []string{live, unlocked, other} {
		if _, err := os.Stat(filepath.Join(d, "Default", "Cache", "index")); err != nil {
			t.Errorf("%s: %v, want kept with its files", filepath.Base(d), err)
		}
	}
	if _, err := os.Stat(filepath.Join(live, ownerFile)); err != nil {
		t.Errorf("the live directory's lock file: %v", err)
	}
}

// ownDir leaves exactly one file in the directory, locked: a sweep in the
// same process (another open file, as another pool would take it) finds
// the lock held and keeps the directory.
func TestOwnDirLocks(t *testing.T) {
	tmp := t.TempDir()
	d := filepath.Join(tmp, "yella-browser-x")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := ownDir(d)
	if err != nil {
		t.Fatal(err)
	}
	es, _ := os.ReadDir(d)
	if len(es) != 1 || es[0].Name() != ownerFile {
		t.Fatalf("entries %v, want only %s", es, ownerFile)
	}
	if got := sweepStale(tmp); len(got) != 0 {
		t.Fatalf("swept %v while its lock is held", got)
	}
	f.Close()
	if got := sweepStale(tmp); len(got) != 1 {
		t.Fatalf("swept %v once the lock was released, want the directory", got)
	}
}
