package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReport: a report file of any content (a truncated write, a report
// from another version, a hand edit) either fails to load with an error
// naming the file or loads and renders as text and as the benchmark page
// without panicking.
func FuzzReport(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"scenario":{"id":"x","phases":[{"label":"a","rate":1,"duration_ns":-5}]},"samples":[{"t":1}],"phaseResults":[{}]}`))
	f.Add([]byte(`{"recovery":{"kills":[{}]},"capacity":{},"samples":[]}`))
	f.Add([]byte(`[1,2`))
	f.Add([]byte(`{"scale":1e308,"totals":{"offered":-1}}`))
	if b, err := json.Marshal(sample()); err == nil {
		f.Add(b)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "r.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Load(path)
		if err != nil {
			if r != nil {
				t.Fatal("Load returned a report and an error")
			}
			return
		}
		_ = Text(r)
		_ = PageMarkdown(map[string]*Report{r.Scenario.ID: r}, nil, "reports")
	})
}
