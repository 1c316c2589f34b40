package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

const childEnv = "YELLA_QUICKSTART_CHILD"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		if err := run(strings.Fields(args), os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The main job survives kill -9: run it, kill it mid-pipeline, run it
// again, and every order chain finishes (resolving fenced runs when
// asked).
func TestQuickstartResumesAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quickstart three times")
	}
	db := filepath.Join(t.TempDir(), "qs.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=-db "+db)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	completed := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() && completed < 4 {
		if strings.Contains(sc.Text(), "run:completed") {
			completed++
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if completed < 4 {
		t.Fatalf("the first run finished before it could be killed")
	}

	var buf bytes.Buffer
	start := time.Now()
	if err := run([]string{"-db", db}, &buf); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	m := regexp.MustCompile(`(\d+) runs reclaimed after a crash`).FindStringSubmatch(got)
	if !strings.Contains(got, "was placed by an earlier run; continuing it") || m == nil || m[1] == "0" {
		t.Errorf("the second run did not resume the killed one's runs:\n%s", got)
	}
	buf.Reset()
	if err := run([]string{"-db", db, "-retry-fenced"}, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "store: 20 completed, 0 fenced, 0 dead") {
		t.Errorf("not every chain completed:\n%s", buf.String())
	}
	t.Logf("resumed and finished in %v", time.Since(start))
}

// TestDefaultRunLeavesTheRepositoryAlone: run with its defaults from the
// repository's root, the quickstart keeps its database in the user's cache
// directory and changes nothing in the repository.
func TestDefaultRunLeavesTheRepositoryAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quickstart")
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	t.Chdir(strings.TrimSpace(string(root)))
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	status := func() string {
		out, err := exec.Command("git", "status", "--porcelain", "--ignored", "--untracked-files=all").Output()
		if err != nil {
			t.Skipf("git status: %v", err)
		}
		return string(out)
	}
	before := status()
	var buf bytes.Buffer
	if err := run([]string{"-orders", "1"}, &buf); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if after := status(); after != before {
		t.Errorf("the quickstart changed the repository:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, err := os.Stat(filepath.Join(cache, "yella", "quickstart.db")); err != nil {
		t.Errorf("no database in the cache directory: %v\n%s", err, buf.String())
	}
}
