package obs

import (
	"fmt"

	"github.com/yella-go/yella/store"
)

// MergeRollups merges stored rollups of one process and bucket into one:
// counters summed, each histogram's sketches merged into a single encoded
// sketch. It is the merge a store.RollupCompactor applies.
func MergeRollups(rs []store.Rollup) (store.Rollup, error) {
	if len(rs) == 0 {
		return store.Rollup{}, fmt.Errorf("obs: no rollups to merge")
	}
	out := store.Rollup{Bucket: rs[0].Bucket, Process: rs[0].Process, Counts: map[string]int64{}, Hists: map[string][][]byte{}}
	sketches := map[string]*Sketch{}
	for _, r := range rs {
		if !r.Bucket.Equal(out.Bucket) || r.Process != out.Process {
			return out, fmt.Errorf("obs: merging rollups of %s at %v with %s at %v", out.Process, out.Bucket, r.Process, r.Bucket)
		}
		mergeInto(out.Counts, nil, r.Counts, nil, true)
		for n, encs := range r.Hists {
			for _, enc := range encs {
				k, err := DecodeSketch(enc)
				if err != nil {
					return out, fmt.Errorf("obs: histogram %s of %s at %v: %w", n, r.Process, r.Bucket, err)
				}
				mergeSketch(sketches, n, k, true)
			}
		}
	}
	for n, k := range sketches {
		out.Hists[n] = [][]byte{k.Encode()}
	}
	return out, nil
}
