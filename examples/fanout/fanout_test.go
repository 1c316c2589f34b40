package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The crawl on a real SQLite file: 50 children, retried 500s, one 404
// reported by the join; run again, the crawl's result is returned as it
// ended.
func TestFanOut(t *testing.T) {
	db := filepath.Join(t.TempDir(), "f.db")
	for range 2 {
		var out strings.Builder
		if err := run([]string{"-db", db}, &out); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if !strings.Contains(got, `completed {"pages":49,"bytes":`) || !strings.Contains(got, `"failed":["`) || !strings.Contains(got, "404") {
			t.Errorf("output %q", got)
		}
	}
}
