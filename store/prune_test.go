package store

import (
	"fmt"
	"testing"
)

// TestPruneWindow: which runs one retention call prunes, where it stops
// reading, and where the next call reads on.
func TestPruneWindow(t *testing.T) {
	type run struct {
		seq             int64
		afterCut, prune bool
	}
	kept := func(from, n int64) []run {
		var rs []run
		for s := from; s < from+n; s++ {
			rs = append(rs, run{seq: s})
		}
		return rs
	}
	for _, c := range []struct {
		name      string
		from      int64
		limit     int
		runs      []run // as the store reads them, at most Rows()
		wantTaken []int64
		wantRead  int
		wantNext  int64
	}{
		{"the table's end ends the pass", 0, 5, []run{{1, false, true}, {2, false, false}, {3, false, true}},
			[]int64{1, 3}, 3, 0},
		{"the limit stops the call where it took the last run", 0, 2, []run{{1, false, true}, {2, false, false}, {3, false, true}, {4, false, true}},
			[]int64{1, 3}, 3, 3},
		{"a run admitted after the cut ends the pass", 7, 5, []run{{8, false, true}, {9, true, true}, {10, false, true}},
			[]int64{8}, 2, 0},
		{"a full window of kept runs goes on after it", 0, 1, kept(1, PruneScan),
			nil, PruneScan, PruneScan},
		{"a window short of full is the table's end", 40, 1, kept(41, PruneScan-1),
			nil, PruneScan - 1, 0},
		{"an empty read is the table's end", 40, 3, nil,
			nil, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := NewPruneWindow(c.from, c.limit)
			if w.Rows() != PruneScan*c.limit {
				t.Fatalf("Rows %d, want %d", w.Rows(), PruneScan*c.limit)
			}
			var taken []int64
			read := 0
			for _, r := range c.runs {
				read++
				take, more := w.Add(r.seq, r.afterCut, r.prune)
				if take {
					taken = append(taken, r.seq)
				}
				if !more {
					break
				}
			}
			if fmt.Sprint(taken) != fmt.Sprint(c.wantTaken) || read != c.wantRead || w.Next() != c.wantNext {
				t.Errorf("took %v after reading %d, next %d; want %v, %d, %d", taken, read, w.Next(), c.wantTaken, c.wantRead, c.wantNext)
			}
		})
	}
}
