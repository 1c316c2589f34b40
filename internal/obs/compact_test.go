package obs

import (
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// MergeRollups sums counters and merges sketches into one per histogram;
// rollups of different groups and undecodable sketches are refused.
func TestMergeRollups(t *testing.T) {
	b := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	one := func(ms ...float64) []byte {
		k := NewSketch()
		for _, v := range ms {
			k.AddMs(v)
		}
		return k.Encode()
	}
	m, err := MergeRollups([]store.Rollup{
		{Bucket: b, Process: "p", Counts: map[string]int64{"run": 2, "failed": 1}, Hists: map[string][][]byte{"run": {one(10, 20)}}},
		{Bucket: b, Process: "p", Counts: map[string]int64{"run": 1}, Hists: map[string][][]byte{"run": {one(30), one(40)}, "effect": {one(5)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Counts["run"] != 3 || m.Counts["failed"] != 1 || !m.Bucket.Equal(b) || m.Process != "p" {
		t.Errorf("merged %+v", m)
	}
	if len(m.Hists["run"]) != 1 || len(m.Hists["effect"]) != 1 {
		t.Fatalf("sketches not merged into one each: %d %d", len(m.Hists["run"]), len(m.Hists["effect"]))
	}
	k, err := DecodeSketch(m.Hists["run"][0])
	if err != nil || k.Count() != 4 || k.Max() != 40 || k.Min() != 10 {
		t.Errorf("merged sketch: %v count %d min %v max %v", err, k.Count(), k.Min(), k.Max())
	}

	for name, rs := range map[string][]store.Rollup{
		"none":          nil,
		"two processes": {{Bucket: b, Process: "p"}, {Bucket: b, Process: "q"}},
		"two buckets":   {{Bucket: b, Process: "p"}, {Bucket: b.Add(time.Minute), Process: "p"}},
		"bad sketch":    {{Bucket: b, Process: "p", Hists: map[string][][]byte{"run": {[]byte("x")}}}},
	} {
		if _, err := MergeRollups(rs); err == nil {
			t.Errorf("%s: merged without an error", name)
		}
	}
}
