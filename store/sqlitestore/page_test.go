package sqlitestore

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/yella-go/yella/store"
)

// A page merged from several sorted streams holds the first limit runs in
// listing order, and never more than limit runs: its array is allocated
// once, at the page size.
func TestPageMergesWithinLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		order := store.Order(trial % 2)
		limit := 1 + rng.IntN(12)
		var all []int64
		streams := make([][]int64, 1+rng.IntN(7))
		for seq := int64(1); seq <= int64(rng.IntN(60)); seq++ {
			i := rng.IntN(len(streams))
			streams[i] = append(streams[i], seq)
			all = append(all, seq)
		}
		if order == store.NewestFirst {
			slices.Reverse(all)
			for _, s := range streams {
				slices.Reverse(s)
			}
		}
		p := newPage(order, limit)
		base := &p.runs[:1][0]
		offered := 0
		for _, s := range streams {
			for _, seq := range s[:min(len(s), limit)] { // a query reads at most limit rows
				offered++
				if !p.offer(store.Run{Seq: seq}) {
					break
				}
				if len(p.runs) > limit || &p.runs[:1][0] != base {
					t.Fatalf("trial %d: page grew to %d runs (limit %d) or was reallocated", trial, len(p.runs), limit)
				}
			}
		}
		var got []int64
		for _, r := range p.runs {
			got = append(got, r.Seq)
		}
		want := all[:min(len(all), limit)]
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (order %d, limit %d, streams %v): page %v, want %v", trial, order, limit, streams, got, want)
		}
	}
}
