package prommetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/memstore"
)

// TestEveryEventTypeCounted: each lifecycle event type the engine
// publishes moves a counter or a histogram of the exporter, so an event
// type added to the engine cannot be left out of the exposition unseen.
func TestEveryEventTypeCounted(t *testing.T) {
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	x := New(eng, Options{})
	defer x.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(x.runDur, x.effDur, x.runs, x.effects, x.drops, x.engine)
	total := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
		return n
	}
	for _, et := range yella.EventTypes() {
		before := total()
		x.observe(yella.Event{Type: et, Process: "p", Duration: time.Millisecond})
		if total() == before {
			t.Errorf("event %s moves no counter", et)
		}
	}
}
