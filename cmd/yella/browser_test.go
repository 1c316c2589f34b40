package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// startServe runs "yella serve" as a real process (see yellaCmd) and
// returns its base URL; the process is stopped with SIGTERM
// when the test ends.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "serve.db")
	cmd := yellaCmd(nil, append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--log-level", "warn"}, args...)...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	var base string
	for lines.Scan() {
		if m := servingRE.FindStringSubmatch(lines.Text()); m != nil {
			base = m[1]
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
		}
	})
	if base == "" {
		t.Fatal("serve did not start")
	}
	return base
}

// chromium finds Debian's Chromium (CI installs the package).
func chromium(t *testing.T) string {
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium (apt-get install chromium): skipping the browser test")
	return ""
}

// artifacts is where the browser test leaves its screenshots.
func artifacts(t *testing.T) string {
	dir := os.Getenv("YELLA_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDashboardInBrowser drives the dashboard of a real "yella serve" in
// headless Chromium: it emits from the emit form, sees the run appear live
// on the runs page open in another tab, opens the run, waits for it to be
// dead-lettered, and requeues it.
func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: not in -short")
	}
	exe := chromium(t)
	base := startServe(t, "--demo-rate", "2")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Headless, chromedp.WindowSize(1280, 900), chromedp.DisableGPU)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	browser, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel := context.WithTimeout(browser, 90*time.Second)
	defer cancel()

	// Tab 1: the runs page of the legacy export, live.
	list := "/runs?process=legacy-export"
	if err := chromedp.Do(ctx, chromedp.Navigate(base+list), chromedp.WaitVisible(chromedp.CSS("#activity"))); err != nil {
		t.Fatalf("open the runs page: %v", err)
	}
	before := rows(t, ctx)

	// Tab 2: the emit form.
	tab2, cancel2 := chromedp.NewContext(browser)
	defer cancel2()
	tab2, cancel3 := context.WithTimeout(tab2, 60*time.Second)
	defer cancel3()
	err := chromedp.Do(tab2,
		chromedp.Navigate(base+"/emit"),
		chromedp.WaitVisible(chromedp.CSS("#emit-form")),
		chromedp.SetValue(chromedp.CSS("#emit-event"), "export:requested"),
		chromedp.SetValue(chromedp.CSS("#emit-payload"), `{"report": "from the browser test"}`),
		chromedp.Click(chromedp.CSS("#emit-submit")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	if err != nil {
		t.Fatalf("emit from the form: %v", err)
	}
	runURL, err := chromedp.Run(tab2, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	id := runURL[strings.LastIndex(runURL, "/")+1:]
	if !strings.Contains(runURL, "/runs/") || len(id) < 30 {
		t.Fatalf("after the emit the browser is at %s, want the new run's page", runURL)
	}

	// Tab 1 shows the new run without a reload.
	sel := `tr[data-run-id="` + id + `"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("the run did not appear live on the runs page (%d rows before): %v", before, err)
	}

	// Its page: it fails (the legacy server is down) and is dead-lettered
	// after its retries; the page updates itself, and Requeue appears.
	requeue := `button[data-action="requeue"]`
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[href="/runs/`+id+`"]`)), chromedp.WaitVisible(chromedp.CSS(requeue))); err != nil {
		t.Fatalf("the run page never offered Requeue: %v", err)
	}
	if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(artifacts(t), "dashboard-run-dead-letter.png"), shot, 0o644)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(requeue)), chromedp.WaitVisible(chromedp.CSS("#flash"))); err != nil {
		t.Fatalf("requeue: %v", err)
	}
	flash, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#flash")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(flash), "requeue") {
		t.Errorf("after requeue the page says %q", flash)
	}
	// The API agrees: the run was requeued from the dead letters.
	resp, err := http.Get(base + "/api/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "requeued from dead letter") {
		t.Errorf("the run's timeline lacks the requeue: %s", body)
	}
	// The overview, for the README.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.Sleep(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(artifacts(t), "dashboard-overview.png"), shot, 0o644)
	}
}

func rows(t *testing.T, ctx context.Context) int {
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("tr[data-run-id]").length`))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestScreenshot regenerates the README's screenshot from a running
// server: YELLA_SHOT_URL=http://127.0.0.1:3400/ YELLA_SHOT_OUT=docs/dashboard.png
// (relative to the repository root). Skipped unless both are set.
func TestScreenshot(t *testing.T) {
	url, out := os.Getenv("YELLA_SHOT_URL"), os.Getenv("YELLA_SHOT_OUT")
	if url == "" || out == "" {
		t.Skip("YELLA_SHOT_URL and YELLA_SHOT_OUT not set")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.Headless, chromedp.WindowSize(1280, 860), chromedp.DisableGPU)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.Sleep(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", out), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}
