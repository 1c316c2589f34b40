package dashboard_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/yella-go/yella"
)

// TestScriptKnowsEveryEventType: the script subscribes to each event type by
// name (EventSource delivers a named event only to a listener of that
// name), so its list must be the engine's, or the pages stop following an
// event renamed or added.
func TestScriptKnowsEveryEventType(t *testing.T) {
	js, err := os.ReadFile(filepath.Join("static", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)const TYPES = \[(.*?)\];`).FindSubmatch(js)
	if m == nil {
		t.Fatal("static/app.js: no `const TYPES = [...]` list")
	}
	var got []string
	for _, q := range regexp.MustCompile(`'([^']*)'`).FindAllSubmatch(m[1], -1) {
		got = append(got, string(q[1]))
	}
	var want []string
	for _, et := range yella.EventTypes() {
		want = append(want, string(et))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("app.js TYPES = %q\nwant yella.EventTypes() = %q", got, want)
	}
}

// TestWatchedTypesExist: every data-watch-types entry of a template (an
// event type or a prefix such as "run:") matches at least one event type,
// so a fragment never waits for an event that is never published.
func TestWatchedTypesExist(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("templates", "*.html"))
	if err != nil || len(files) == 0 {
		t.Fatalf("templates: %v (%d files)", err, len(files))
	}
	attr := regexp.MustCompile(`data-watch-types="([^"]*)"`)
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range attr.FindAllSubmatch(b, -1) {
			for _, w := range strings.Fields(string(m[1])) {
				seen++
				if !slices.ContainsFunc(yella.EventTypes(), func(et yella.EventType) bool { return strings.HasPrefix(string(et), w) }) {
					t.Errorf("%s: data-watch-types entry %q matches no yella event type", f, w)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no data-watch-types entry found in the templates")
	}
}
