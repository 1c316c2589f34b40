package benchcmd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if ChildMain() { // the runner re-executes this test binary per scenario
		return
	}
	os.Exit(m.Run())
}

// gitStatus is the repository's status, ignored files included.
func gitStatus(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "status", "--porcelain", "--ignored", "--untracked-files=all").Output()
	if err != nil {
		t.Skipf("git status: %v", err)
	}
	return string(out)
}

// TestDefaultRunLeavesTheRepositoryAlone: a benchmark run and the page
// with default flags, from the repository's root, write under the user's
// cache directory and change nothing in the repository.
func TestDefaultRunLeavesTheRepositoryAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a benchmark scenario for about 15 s")
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	t.Chdir(strings.TrimSpace(string(root)))
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	before := gitStatus(t)
	var out bytes.Buffer
	if err := Run(context.Background(), "yella bench", []string{"capacity__api-mixed__fleet-c20", "--scale", "0.01"}, &out, &out); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	if err := Run(context.Background(), "yella bench", []string{"report"}, &out, &out); err != nil {
		t.Fatalf("report: %v\n%s", err, out.String())
	}
	if after := gitStatus(t); after != before {
		t.Errorf("the run changed the repository:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	dir := filepath.Join(cache, "yella", "bench")
	for _, p := range []string{"index.json", filepath.Join("page", "benchmarks.md")} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("the default run wrote no %s: %v\n%s", p, err, out.String())
		}
	}
}

// TestPublishNeedsTheRoot: --publish writes only the committed copies, and
// only from the repository's root.
func TestPublishNeedsTheRoot(t *testing.T) {
	t.Chdir(t.TempDir())
	err := Run(context.Background(), "yella bench", []string{"report", "--publish"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "repository's root") {
		t.Fatalf("--publish outside the repository: %v", err)
	}
	err = Run(context.Background(), "yella bench", []string{"report", "--publish", "--docs", "x"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("--publish with --docs: %v", err)
	}
}

// Without Chromium a group skips its real-browser scenarios, saying so,
// and one asked for by name fails with the reason.
func TestBrowserScenariosNeedChromium(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var out, errOut bytes.Buffer
	if err := Run(context.Background(), "yella bench", []string{"browser", "--scale", "0.01"}, &out, &errOut); err != nil {
		t.Fatalf("group browser without Chromium: %v", err)
	}
	if n := strings.Count(errOut.String(), "skipping scraper-browser__"); n != 3 || !strings.Contains(errOut.String(), "needs Chromium") {
		t.Errorf("stderr (%d skipped):\n%s", n, errOut.String())
	}
	err := Run(context.Background(), "yella bench", []string{"scraper-browser__fleet-c40__scraper-c1__pool-1x1", "--scale", "0.01"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "apt-get install chromium") {
		t.Errorf("one browser scenario without Chromium: %v", err)
	}
}
