package dashboard_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	uuidRe  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	isoRe   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	stampRe = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}`)
	hashRe  = regexp.MustCompile(`\?v=[0-9a-f]+`)
)

// normalise replaces what differs between runs: run ids (numbered in order
// of appearance, their short forms too), times and asset hashes.
func normalise(s string) string {
	ids := map[string]string{}
	for _, id := range uuidRe.FindAllString(s, -1) {
		if _, ok := ids[id]; !ok {
			ids[id] = fmt.Sprintf("RUN-%d", len(ids)+1)
		}
	}
	for id, n := range ids {
		s = strings.ReplaceAll(s, id, n)
		s = strings.ReplaceAll(s, "…"+id[len(id)-8:], "…"+n)
	}
	s = isoRe.ReplaceAllString(s, "TIME")
	s = stampRe.ReplaceAllString(s, "STAMP")
	return hashRe.ReplaceAllString(s, "?v=HASH")
}

// golden compares got with testdata/name, or rewrites the file when
// UPDATE_GOLDEN=1.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if string(want) != got {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
		for i := 0; i < max(len(wl), len(gl)); i++ {
			var w, g string
			if i < len(wl) {
				w = wl[i]
			}
			if i < len(gl) {
				g = gl[i]
			}
			if w != g {
				t.Fatalf("%s differs at line %d (UPDATE_GOLDEN=1 rewrites it):\nwant: %s\ngot:  %s", path, i+1, w, g)
			}
		}
	}
}

func TestGolden(t *testing.T) {
	f := newFixture(t)
	pages := []struct{ file, target string }{
		{"overview.html", "/"},
		{"run.html", "/runs/" + f.ok},
		{"run-fenced.html", "/runs/" + fenceID},
		{"processes.html", "/processes"},
		{"trace.html", "/trace/" + f.ok},
		{"trace-fenced.html", "/trace/" + fenceID},
	}
	for _, p := range pages {
		r := f.get(p.target)
		if r.Code != 200 {
			t.Fatalf("GET %s: %d", p.target, r.Code)
		}
		golden(t, p.file, normalise(r.Body))
	}
}
