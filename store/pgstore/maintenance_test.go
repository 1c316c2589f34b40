package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// sumMerge merges rollups as the engine does for counters; sketches are
// concatenated (the engine decodes and merges them).
func sumMerge(rs []store.Rollup) (store.Rollup, error) {
	out := store.Rollup{Bucket: rs[0].Bucket, Process: rs[0].Process, Counts: map[string]int64{}, Hists: map[string][][]byte{}}
	for _, r := range rs {
		for k, v := range r.Counts {
			out.Counts[k] += v
		}
		for k, v := range r.Hists {
			out.Hists[k] = append(out.Hists[k], v...)
		}
	}
	return out, nil
}

func rollupRows(t *testing.T, s *pgstore.Store) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+s.Schema()+".rollups").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// totals sums every stored counter by process and bucket.
func totals(t *testing.T, s *pgstore.Store) map[string]int64 {
	t.Helper()
	rs, err := s.Rollups(context.Background(), time.Unix(0, 0), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, r := range rs {
		for k, v := range r.Counts {
			out[fmt.Sprintf("%s/%d/%s", r.Process, r.Bucket.Unix(), k)] += v
		}
		for k, v := range r.Hists {
			out[fmt.Sprintf("%s/%d/hist %s", r.Process, r.Bucket.Unix(), k)] += int64(len(v))
		}
	}
	return out
}

// Rollups that nodes add for the same process and bucket are compacted
// into one row each before the cut, and only there; what a read returns
// is unchanged; a failed merge changes nothing; two nodes compacting at
// once count nothing twice.
func TestCompactRollups(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{})
	t0 := time.Now().Truncate(time.Minute).Add(-time.Hour)
	add := func(s *pgstore.Store, min int, p string, n int64) {
		t.Helper()
		r := store.Rollup{Bucket: t0.Add(time.Duration(min) * time.Minute), Process: p, Counts: map[string]int64{"run": n}, Hists: map[string][][]byte{"run": {[]byte{byte(n)}}}}
		if err := s.AddRollups(ctx, []store.Rollup{r}); err != nil {
			t.Fatal(err)
		}
	}
	add(a, 0, "p", 1)
	add(b, 0, "p", 2)
	add(a, 0, "q", 3)
	add(a, 1, "p", 4)
	add(b, 1, "p", 5)
	add(a, 9, "p", 6) // after the cut
	add(b, 9, "p", 7)
	want := totals(t, a)

	if _, err := a.CompactRollups(ctx, t0.Add(5*time.Minute), 10, func([]store.Rollup) (store.Rollup, error) {
		return store.Rollup{}, errors.New("no")
	}); err == nil {
		t.Fatal("a failing merge was not reported")
	}
	if n := rollupRows(t, a); n != 7 {
		t.Fatalf("a failed compaction left %d rows, want the 7 added", n)
	}

	groups, err := a.CompactRollups(ctx, t0.Add(5*time.Minute), 10, sumMerge)
	if err != nil || groups != 2 {
		t.Fatalf("compacted %d groups (%v), want 2: p at 0 and at 1", groups, err)
	}
	if n := rollupRows(t, a); n != 5 {
		t.Errorf("%d rows after compaction, want 5 (p@0, q@0, p@1, two p@9 after the cut)", n)
	}
	if got := totals(t, b); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reads changed by compaction:\n got %v\nwant %v", got, want)
	}

	// Many groups, two nodes compacting at once.
	for m := 10; m < 60; m++ {
		for i := range 3 {
			add([]*pgstore.Store{a, b}[i%2], m, "r", int64(i+1))
		}
	}
	want = totals(t, a)
	var wg sync.WaitGroup
	for _, s := range []*pgstore.Store{a, b} {
		wg.Go(func() {
			for {
				n, err := s.CompactRollups(ctx, t0.Add(time.Hour), 7, sumMerge)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if got := totals(t, a); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("concurrent compaction changed the totals:\n got %v\nwant %v", got, want)
	}
	if n := rollupRows(t, a); n != 4+50 { // p@9's two rows are before this cut
		t.Errorf("%d rows after concurrent compaction, want %d", n, 4+50)
	}
}
