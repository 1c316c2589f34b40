package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTicksOnceAcrossRestarts runs the program twice on one file with a
// tick every second: each run writes its reports, and the second run does
// not write again a report the first wrote.
func TestTicksOnceAcrossRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the program for 5 s")
	}
	db := filepath.Join(t.TempDir(), "report.db")
	seen := map[string]int{}
	for range 2 {
		out := capture(t, func() error { return run([]string{"-db", db, "-cron", "@every 1s", "-for", "2500ms", "-tz", "UTC"}) })
		for _, line := range strings.Split(out, "\n") {
			if tick, ok := strings.CutPrefix(line, "report for the tick of "); ok {
				seen[strings.Fields(tick)[0]]++
			}
		}
	}
	if len(seen) < 3 {
		t.Fatalf("%d reports in 5 s of ticks every second: %v", len(seen), seen)
	}
	for tick, n := range seen {
		if n != 1 {
			t.Errorf("the tick of %s was reported %d times", tick, n)
		}
	}
}

func capture(t *testing.T, fn func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				done <- b.String()
				return
			}
		}
	}()
	ferr := fn()
	os.Stdout = old
	w.Close()
	out := <-done
	if ferr != nil {
		t.Fatal(ferr)
	}
	return out
}
