package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yella-go/yella/connector/browser"
)

// The example reads the two pages in Chromium (after their late price
// appears), fails the missing one without retrying it, and a second run
// on the same database reads nothing again.
func TestScrapeExample(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	if _, err := browser.FindChromium(); err != nil {
		t.Skip("no Chromium (apt-get install chromium)")
	}
	db := filepath.Join(t.TempDir(), "scrape.db")
	var out bytes.Buffer
	if err := run([]string{"-db", db}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		`/tea     completed: {"text":"tea\n\nPrice: 4.20","title":"tea"}`,
		`/coffee  completed: {"text":"coffee\n\nPrice: 3.10","title":"coffee"}`,
		"/cocoa   errored: browser GET http://",
		"/cocoa: 404 Not Found",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	out.Reset()
	if err := run([]string{"-db", db}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `/tea     completed: {"text":"tea\n\nPrice: 4.20"`) {
		t.Errorf("second run:\n%s", out.String())
	}
}
