package obs

import (
	"math"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

// RelativeAccuracy bounds the relative error of every quantile a Sketch
// reports: the value returned for a quantile is within 1% of a value that
// truly holds that rank.
const RelativeAccuracy = 0.01

// Sketch is a mergeable duration histogram in milliseconds with exact count,
// sum, min and max, and quantiles within RelativeAccuracy: a handful of
// fixed buckets would report a bucket's bound as a percentile, off by up
// to the bucket's width (1 s to 2.5 s, say).
type Sketch struct {
	s *ddsketch.DDSketchWithExactSummaryStatistics
}

func newMapping() mapping.IndexMapping {
	m, err := mapping.NewLogarithmicMapping(RelativeAccuracy)
	if err != nil {
		panic(err) // constant, valid accuracy
	}
	return m
}

// NewSketch returns an empty sketch.
func NewSketch() *Sketch {
	return &Sketch{ddsketch.NewDDSketchWithExactSummaryStatistics(newMapping(), store.SparseStoreConstructor)}
}

// AddMs records one observation in milliseconds; negative values count as 0.
func (k *Sketch) AddMs(ms float64) {
	if ms < 0 || math.IsNaN(ms) {
		ms = 0
	}
	_ = k.s.Add(ms) // only fails for values the mapping cannot index (> ~1e300)
}

// Merge adds every observation of o.
func (k *Sketch) Merge(o *Sketch) {
	if o == nil || o.s.IsEmpty() {
		return
	}
	_ = k.s.MergeWith(o.s) // same mapping by construction
}

// Count is the number of observations.
func (k *Sketch) Count() int64 { return int64(math.Round(k.s.GetCount())) }

// Sum is the sum of observations in milliseconds.
func (k *Sketch) Sum() float64 { return k.s.GetSum() }

// Min is the smallest observation (0 when empty).
func (k *Sketch) Min() float64 {
	v, err := k.s.GetMinValue()
	if err != nil {
		return 0
	}
	return v
}

// Max is the largest observation (0 when empty).
func (k *Sketch) Max() float64 {
	v, err := k.s.GetMaxValue()
	if err != nil {
		return 0
	}
	return v
}

// Quantile returns the q-quantile (0 <= q <= 1) and false when empty.
func (k *Sketch) Quantile(q float64) (float64, bool) {
	v, err := k.s.GetValueAtQuantile(q)
	if err != nil {
		return 0, false
	}
	return v, true
}

// Encode serialises the sketch.
func (k *Sketch) Encode() []byte {
	var b []byte
	k.s.Encode(&b, true)
	return b
}

// DecodeSketch parses a sketch produced by Encode.
func DecodeSketch(b []byte) (*Sketch, error) {
	s, err := ddsketch.DecodeDDSketchWithExactSummaryStatistics(b, store.SparseStoreConstructor, newMapping())
	if err != nil {
		return nil, err
	}
	return &Sketch{s}, nil
}
