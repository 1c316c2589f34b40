//go:build linux

package browser

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yella-go/yella"
)

// An engine process on SQLite is SIGKILLed while its browser, hung
// (SIGSTOP), loads a page for a Scrape: no Chromium process of that engine
// survives it (the parent-death signal takes the browser, the browser's
// helpers follow it), and the
// engine restarted on the same database re-reads the page (the read is
// idempotent) and completes the run with one recorded result.
func TestEngineKilledMidScrape(t *testing.T) {
	rep, s, dir := killMidScrape(t, false)
	if rep.Status != yella.StatusCompleted || !strings.Contains(rep.Output.Text, "released") || rep.Output.Status != 200 {
		t.Fatalf("run after the restart: %+v", rep)
	}
	if len(rep.Effects) != 1 || rep.Effects[0].Status != yella.EffectStatusCompleted {
		t.Errorf("effects %+v, want one completed read", rep.Effects)
	}
	var stored Result
	if err := json.Unmarshal(rep.Effects[0].Output, &stored); err != nil || stored.Text != rep.Output.Text {
		t.Errorf("stored result %+v (%v), want the run's output", stored, err)
	}
	if left := processesUnder(dir); len(left) > 0 {
		t.Errorf("browser processes left after the second engine stopped: %v", left)
	}
	if n := len(s.arrived); n != 1 {
		t.Errorf("%d more requests for the page, want the one re-read after the restart", n)
	}
}

// The same crash with AtMostOnce: the restarted engine does not load the
// page again; it fences the run, whose read stays started, for an operator.
func TestEngineKilledMidScrapeAtMostOnce(t *testing.T) {
	rep, s, _ := killMidScrape(t, true)
	if rep.Status != yella.StatusFenced {
		t.Fatalf("run after the restart: %+v, want fenced", rep)
	}
	if len(rep.Effects) != 1 || rep.Effects[0].Status != yella.EffectStatusStarted {
		t.Errorf("effects %+v, want one read left started", rep.Effects)
	}
	if n := len(s.arrived); n != 0 {
		t.Errorf("%d more requests for the page, want none", n)
	}
}

// killMidScrape runs an engine process that scrapes a held page, SIGKILLs
// it with its browser stopped, checks that the browser died by its
// parent-death signal and that no process of it remains, then runs a second
// engine on the same database with the page released, and returns the
// second engine's report, the site and the browsers' directory.
func killMidScrape(t *testing.T, atMostOnce bool) (childReport, *site, string) {
	if testing.Short() {
		t.Skip("starts and kills engine processes with Chromium")
	}
	if _, err := FindChromium(); err != nil {
		t.Skip("no Chromium (apt-get install chromium)")
	}
	// Orphans of the engine (its browser) become the test's children
	// instead of init's: the test can then wait for the browser and see the
	// signal that ended it, and the browser's process group is not
	// orphaned (an orphaned group with a stopped process gets SIGHUP, which
	// would end the browser without the parent-death signal).
	if err := prctl(prSetChildSubreaper, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		prctl(prSetChildSubreaper, 0)
		reapZombies()
	})
	s := newSite(t)
	tmp := t.TempDir()
	spec := crashChild{DB: filepath.Join(tmp, "yella.db"), Dir: filepath.Join(tmp, "browsers"), URL: s.URL + "/held", AtMostOnce: atMostOnce}
	if err := os.Mkdir(spec.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(spec crashChild) (*exec.Cmd, *bufio.Scanner) {
		raw, _ := json.Marshal(spec)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+string(raw))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, bufio.NewScanner(out)
	}

	// First engine: killed while its browser waits for the page.
	spec.Emit = true
	first, _ := start(spec)
	select {
	case <-s.arrived:
	case <-time.After(2 * time.Minute):
		t.Fatal("the first engine's browser never asked for the page")
	}
	procs := processesUnder(spec.Dir)
	if len(procs) < 2 {
		t.Fatalf("browser processes of the first engine: %v, want its process tree", procs)
	}
	// Chromium quits by itself when its DevTools pipe closes, unless it is
	// hung: stop the browser process, so that only the parent-death signal
	// can end it.
	main := 0
	for _, pid := range procs {
		if pp, _ := parentOf(pid); pp == first.Process.Pid {
			main = pid
		}
	}
	if main == 0 {
		t.Fatalf("no browser process among %v is a child of the engine %d", procs, first.Process.Pid)
	}
	if err := syscall.Kill(main, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	// The test is the browser's subreaper: it sees how the browser ended.
	reaped := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		syscall.Wait4(main, &ws, 0, nil)
		reaped <- ws
	}()
	select {
	case ws := <-reaped:
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("the browser ended with %v, want SIGKILL (its parent-death signal)", ws)
		}
	case <-time.After(10 * time.Second): // the parent-death signal is immediate
		syscall.Kill(main, syscall.SIGKILL)
		t.Fatal("the hung browser outlived its engine by 10 s")
	}
	waitFor(t, 30*time.Second, "no browser process of the killed engine remains", func() bool {
		reapZombies() // the browser's helpers, orphaned to the test
		return len(processesUnder(spec.Dir)) == 0
	})

	// Second engine on the same database: the run resumes and completes.
	s.releaseAll()
	spec.Emit = false
	second, out := start(spec)
	var rep childReport
	for out.Scan() {
		if err := json.Unmarshal(out.Bytes(), &rep); err == nil && rep.Status != "" {
			break
		}
	}
	if err := second.Wait(); err != nil {
		t.Fatalf("second engine: %v", err)
	}
	// The killed engine could not remove its browser's user data
	// directory: the second engine's pool removed it (and its own).
	if owned, _ := filepath.Glob(filepath.Join(spec.Dir, "yella-browser-*", ownerFile)); len(owned) > 0 {
		t.Errorf("user data directories left after both engines: %v", owned)
	}
	return rep, s, spec.Dir
}

const prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER

func prctl(option, arg int) error {
	if _, _, e := syscall.Syscall(syscall.SYS_PRCTL, uintptr(option), uintptr(arg), 0); e != 0 {
		return e
	}
	return nil
}

// reapZombies waits for every child that has ended (orphans adopted as
// subreaper), without blocking.
func reapZombies() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
