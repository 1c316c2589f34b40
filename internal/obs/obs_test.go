package obs

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/yella-go/yella/store/memstore"
)

// The sketch's quantiles stay within 2% of the exact sample quantile over
// a skewed latency distribution: the bound the benchmark reports rely on.
// The sketch guarantees 1% of a value that holds the rank; the margin
// covers the sample quantile's own choice of rank.
func TestSketchAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	k := NewSketch()
	var xs []float64
	for range 20000 {
		v := math.Exp(rng.NormFloat64()*1.2 + 4) // log-normal ms, median ~55ms
		xs = append(xs, v)
		k.AddMs(v)
	}
	sort.Float64s(xs)
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
		exact := xs[int(q*float64(len(xs)-1))]
		got, _ := k.Quantile(q)
		if rel := math.Abs(got-exact) / exact; rel > 0.02 {
			t.Errorf("p%.0f = %.3f, exact %.3f (error %.2f%%)", q*100, got, exact, rel*100)
		}
	}
	if k.Count() != 20000 || k.Min() != xs[0] || k.Max() != xs[len(xs)-1] {
		t.Errorf("count/min/max %d %v %v", k.Count(), k.Min(), k.Max())
	}
	dec, err := DecodeSketch(k.Encode())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := dec.Quantile(0.95)
	b, _ := k.Quantile(0.95)
	if a != b || dec.Count() != k.Count() {
		t.Errorf("round trip changed the sketch: %v vs %v", a, b)
	}
}

func TestRecorderFlushAndQuery(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	r := NewRecorder(time.Minute)
	t0 := time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)
	r.Observe(t0, "p", "run", 10*time.Millisecond)
	r.Observe(t0.Add(time.Minute), "p", "run", 30*time.Millisecond)
	r.Count(t0, "q", "started", 2)
	if err := r.Flush(ctx, st, time.Time{}); err != nil {
		t.Fatal(err)
	}
	r.Observe(t0.Add(time.Minute), "p", "run", 20*time.Millisecond) // pending, not flushed
	if err := r.Flush(ctx, st, t0.Add(time.Minute)); err != nil {   // the open bucket stays in memory
		t.Fatal(err)
	}
	if rs, _ := st.Rollups(ctx, t0.Add(time.Minute).Truncate(time.Minute), t0.Add(time.Hour)); len(rs) != 1 || rs[0].Counts["run"] != 1 {
		t.Fatalf("open bucket was flushed: %+v", rs)
	}
	bs, step, err := r.Query(ctx, st, t0.Add(-30*time.Second), t0.Add(89*time.Second), 30*time.Second, "")
	if err != nil {
		t.Fatal(err)
	}
	if step != time.Minute || len(bs) != 2 {
		t.Fatalf("step %v buckets %d", step, len(bs))
	}
	if bs[0].Counts["run"] != 1 || bs[0].Counts["started"] != 2 || bs[1].Counts["run"] != 2 {
		t.Fatalf("counts %v %v", bs[0].Counts, bs[1].Counts)
	}
	if bs[1].Hists["run"].Count() != 2 {
		t.Fatalf("merged sketch count %d", bs[1].Hists["run"].Count())
	}
	only, _, _ := r.Query(ctx, st, t0, t0, time.Minute, "q")
	if only[0].Counts["run"] != 0 || only[0].Counts["started"] != 2 {
		t.Fatalf("process filter %v", only[0].Counts)
	}
}
