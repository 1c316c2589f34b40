// Package obs aggregates lifecycle events into time-bucketed rollups: counters
// and duration sketches per process and bucket. It keeps the current buckets
// in memory, flushes them to the store on an interval (one small write per
// process and bucket, not one per event) and answers queries by merging what
// is stored with what is not yet flushed.
package obs

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/yella-go/yella/store"
)

// maxPendingErrors bounds the error records buffered between flushes; older
// ones are dropped first (and counted) if a flush keeps failing.
const maxPendingErrors = 1000

type key struct {
	bucket  int64 // unix nanos of the bucket start
	process string
}

type agg struct {
	counts map[string]int64
	hists  map[string]*Sketch
}

// Recorder aggregates events. It is safe for concurrent use.
type Recorder struct {
	bucket time.Duration

	mu            sync.Mutex
	pending       map[key]*agg
	errors        []store.ErrorRecord
	droppedErrors int64
}

// NewRecorder returns a recorder with the given base bucket size.
func NewRecorder(bucket time.Duration) *Recorder {
	return &Recorder{bucket: bucket, pending: map[key]*agg{}}
}

// BucketSize is the base bucket size.
func (r *Recorder) BucketSize() time.Duration { return r.bucket }

func (r *Recorder) aggLocked(at time.Time, process string) *agg {
	k := key{at.Truncate(r.bucket).UnixNano(), process}
	a := r.pending[k]
	if a == nil {
		a = &agg{counts: map[string]int64{}, hists: map[string]*Sketch{}}
		r.pending[k] = a
	}
	return a
}

// Count adds n to counter name of process at time at.
func (r *Recorder) Count(at time.Time, process, name string, n int64) {
	r.mu.Lock()
	r.aggLocked(at, process).counts[name] += n
	r.mu.Unlock()
}

// Observe counts name and records d in the sketch of the same name.
func (r *Recorder) Observe(at time.Time, process, name string, d time.Duration) {
	r.mu.Lock()
	a := r.aggLocked(at, process)
	a.counts[name]++
	h := a.hists[name]
	if h == nil {
		h = NewSketch()
		a.hists[name] = h
	}
	h.AddMs(float64(d) / float64(time.Millisecond))
	r.mu.Unlock()
}

// Error buffers an error record for the next flush.
func (r *Recorder) Error(e store.ErrorRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errors) >= maxPendingErrors {
		r.errors = r.errors[1:]
		r.droppedErrors++
	}
	r.errors = append(r.errors, e)
}

// DroppedErrors reports error records dropped because flushes failed.
func (r *Recorder) DroppedErrors() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.droppedErrors
}

// Flush writes to st the rollups of buckets that ended by before (pass a
// zero time to flush everything, as at shutdown) and every pending error
// record. Writing only closed buckets keeps to about one stored row per
// process and bucket; queries merge the open ones from memory. On failure
// everything is kept for the next flush.
func (r *Recorder) Flush(ctx context.Context, st store.Store, before time.Time) error {
	r.mu.Lock()
	pending, errs := r.pending, r.errors
	r.pending, r.errors = map[key]*agg{}, nil
	if !before.IsZero() {
		for k, a := range pending {
			if time.Unix(0, k.bucket).Add(r.bucket).After(before) {
				r.pending[k] = a
				delete(pending, k)
			}
		}
	}
	r.mu.Unlock()
	if len(pending) == 0 && len(errs) == 0 {
		return nil
	}
	rs := make([]store.Rollup, 0, len(pending))
	for k, a := range pending {
		ro := store.Rollup{Bucket: time.Unix(0, k.bucket), Process: k.process, Counts: a.counts, Hists: map[string][][]byte{}}
		for n, h := range a.hists {
			ro.Hists[n] = [][]byte{h.Encode()}
		}
		rs = append(rs, ro)
	}
	err := st.AddRollups(ctx, rs)
	if err == nil && len(errs) > 0 {
		err = st.AddErrors(ctx, errs)
		if err != nil {
			r.mu.Lock()
			r.errors = append(errs, r.errors...)
			r.mu.Unlock()
			return err
		}
	}
	if err != nil {
		r.restore(pending, errs)
	}
	return err
}

func (r *Recorder) restore(pending map[key]*agg, errs []store.ErrorRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, a := range pending {
		cur := r.pending[k]
		if cur == nil {
			r.pending[k] = a
			continue
		}
		mergeInto(cur.counts, cur.hists, a.counts, a.hists, true)
	}
	r.errors = append(errs, r.errors...)
	if over := len(r.errors) - maxPendingErrors; over > 0 {
		r.errors = r.errors[over:]
		r.droppedErrors += int64(over)
	}
}

// Bucket is the aggregate of one output bucket over every selected process.
type Bucket struct {
	Start  time.Time
	Counts map[string]int64
	Hists  map[string]*Sketch
}

func (b *Bucket) add(counts map[string]int64, hists map[string]*Sketch) {
	mergeInto(b.Counts, b.Hists, counts, hists, false)
}

// mergeInto adds counts and merges sketches into dst by name. With adopt,
// a sketch dst lacks is taken as it is (the caller gives it up); without,
// dst gets a copy, so the source stays the caller's.
func mergeInto(dstCounts map[string]int64, dstHists map[string]*Sketch, counts map[string]int64, hists map[string]*Sketch, adopt bool) {
	for n, v := range counts {
		dstCounts[n] += v
	}
	for n, h := range hists {
		mergeSketch(dstHists, n, h, adopt)
	}
}

// mergeSketch merges h into dst[n], adopting h (or, without adopt, a copy)
// when dst has no sketch n.
func mergeSketch(dst map[string]*Sketch, n string, h *Sketch, adopt bool) {
	switch {
	case dst[n] != nil:
		dst[n].Merge(h)
	case adopt:
		dst[n] = h
	default:
		dst[n] = NewSketch()
		dst[n].Merge(h)
	}
}

// Query returns one Bucket of size step for every step from from to to
// (inclusive of the bucket containing to), merging stored and pending
// rollups of the given process ("" for all). step is rounded up to a
// multiple of the base bucket so no bucket claims resolution it lacks.
func (r *Recorder) Query(ctx context.Context, st store.Store, from, to time.Time, step time.Duration, process string) ([]Bucket, time.Duration, error) {
	if step < r.bucket {
		step = r.bucket
	}
	step = (step + r.bucket - 1) / r.bucket * r.bucket
	first := from.Truncate(step)
	last := to.Truncate(step)
	n := int(last.Sub(first)/step) + 1
	out := make([]Bucket, n)
	for i := range out {
		out[i] = Bucket{Start: first.Add(time.Duration(i) * step), Counts: map[string]int64{}, Hists: map[string]*Sketch{}}
	}
	place := func(at time.Time) *Bucket {
		i := int(at.Truncate(step).Sub(first) / step)
		if i < 0 || i >= n {
			return nil
		}
		return &out[i]
	}
	stored, err := st.Rollups(ctx, first.Truncate(r.bucket), last.Add(step))
	if err != nil {
		return nil, step, err
	}
	for _, ro := range stored {
		if process != "" && ro.Process != process {
			continue
		}
		b := place(ro.Bucket)
		if b == nil {
			continue
		}
		hists := map[string]*Sketch{}
		for name, encs := range ro.Hists {
			for _, enc := range encs {
				s, err := DecodeSketch(enc)
				if err != nil {
					continue // a damaged sketch loses its percentiles, not the query
				}
				if hists[name] == nil {
					hists[name] = s
				} else {
					hists[name].Merge(s)
				}
			}
		}
		b.add(ro.Counts, hists)
	}
	r.mu.Lock()
	for k, a := range r.pending {
		if process != "" && k.process != process {
			continue
		}
		if b := place(time.Unix(0, k.bucket)); b != nil {
			b.add(a.counts, a.hists)
		}
	}
	r.mu.Unlock()
	return out, step, nil
}

// Errors returns up to limit error records between from and to, newest
// first, from the store and the unflushed buffer.
func (r *Recorder) Errors(ctx context.Context, st store.Store, from, to time.Time, limit int) ([]store.ErrorRecord, error) {
	stored, err := st.Errors(ctx, from, to, limit)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	for _, e := range r.errors {
		if !e.At.Before(from) && !e.At.After(to) {
			stored = append(stored, e)
		}
	}
	r.mu.Unlock()
	sort.SliceStable(stored, func(i, j int) bool { return stored[i].At.After(stored[j].At) })
	if len(stored) > limit {
		stored = stored[:limit]
	}
	return stored, nil
}
