package pgstore

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Owners get their numbers from the database, so two stores on one schema
// (two nodes) claiming for owners at once agree: one owner has one number
// whichever store asks first, and two owners never share one.
func TestOwnerNumbersShared(t *testing.T) {
	a := planStore(t, "ownernums")
	b, err := Open(context.Background(), os.Getenv("YELLA_PG_URL"), Options{Schema: a.opts.Schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	const owners = 40
	got := make([][2]int32, owners)
	var wg sync.WaitGroup
	errs := make(chan error, 2*owners)
	for k, s := range []*Store{a, b} {
		for i := range owners {
			wg.Go(func() {
				n, err := s.ownerNum(context.Background(), fmt.Sprintf("owner-%d", i))
				if err != nil {
					errs <- err
				}
				got[i][k] = n
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int32]int{}
	for i, g := range got {
		if g[0] != g[1] || g[0] == 0 {
			t.Errorf("owner-%d: numbers %d and %d from the two stores; want one", i, g[0], g[1])
		}
		if j, ok := seen[g[0]]; ok {
			t.Errorf("owner-%d and owner-%d share the number %d", i, j, g[0])
		}
		seen[g[0]] = i
	}
	// A number once given stays the owner's, also for a store that has
	// not asked for it yet.
	c, err := Open(context.Background(), os.Getenv("YELLA_PG_URL"), Options{Schema: a.opts.Schema})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := c.ownerNum(context.Background(), "owner-7"); err != nil || n != got[7][0] {
		t.Errorf("owner-7 from a third store: %d, %v; want %d", n, err, got[7][0])
	}
}
