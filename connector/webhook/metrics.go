package webhook

import (
	"sort"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The outcomes a request is counted under.
const (
	OutcomeAdmitted         = "admitted"           // 202: runs admitted
	OutcomeDuplicate        = "duplicate"          // 200: a repeat of an admitted event; nothing new
	OutcomeHandshake        = "handshake"          // 200: a provider's handshake answered (Slack's challenge, GitHub's ping)
	OutcomeBadSignature     = "bad-signature"      // 401
	OutcomeStale            = "stale"              // 401: timestamp outside the tolerance (a replay, or a skewed clock)
	OutcomeMissingHeader    = "missing-header"     // 400
	OutcomeMalformed        = "malformed"          // 400 (or 415): unusable header or body
	OutcomeUnknownSource    = "unknown-source"     // 404
	OutcomeMethodNotAllowed = "method-not-allowed" // 405
	OutcomeTooLarge         = "too-large"          // 413
	OutcomeUnroutable       = "unroutable"         // 422: no process listens to the event
	OutcomeBusy             = "busy"               // 503: MaxInFlight requests in progress
	OutcomeAtCapacity       = "at-capacity"        // 503: a listener was dropped at its cap
	OutcomeEmitFailed       = "emit-failed"        // 503: the store or the engine could not admit
)

var outcomes = []string{OutcomeAdmitted, OutcomeDuplicate, OutcomeHandshake, OutcomeBadSignature, OutcomeStale,
	OutcomeMissingHeader, OutcomeMalformed, OutcomeUnknownSource, OutcomeMethodNotAllowed, OutcomeTooLarge,
	OutcomeUnroutable, OutcomeBusy, OutcomeAtCapacity, OutcomeEmitFailed}

var outcomeIndex = func() map[string]int {
	m := map[string]int{}
	for i, o := range outcomes {
		m[o] = i
	}
	return m
}()

// metrics counts requests by source and outcome. The sources are fixed at
// New; requests to an unknown source count under source "", so a scan of
// random paths cannot grow the table.
type metrics struct {
	sources []string
	counts  map[string][]atomic.Uint64
}

func newMetrics(names []string) *metrics {
	m := &metrics{counts: map[string][]atomic.Uint64{}}
	m.sources = append([]string{""}, names...)
	sort.Strings(m.sources)
	for _, n := range m.sources {
		m.counts[n] = make([]atomic.Uint64, len(outcomes))
	}
	return m
}

func (m *metrics) add(source, outcome string) {
	m.counts[source][outcomeIndex[outcome]].Add(1)
}

// Count is the number of requests of one source with one outcome.
type Count struct {
	Source  string // "" for requests to no configured source
	Outcome string // one of the Outcome constants
	N       uint64
}

// Counts returns the non-zero request counters, by source then outcome.
func (h *Handler) Counts() []Count {
	var out []Count
	for _, s := range h.metrics.sources {
		for i, o := range outcomes {
			if n := h.metrics.counts[s][i].Load(); n > 0 {
				out = append(out, Count{Source: s, Outcome: o, N: n})
			}
		}
	}
	return out
}

var requestsDesc = prometheus.NewDesc("yella_webhook_requests_total",
	"Webhook requests by source and outcome (admitted, duplicate, bad-signature, stale, ...).",
	[]string{"source", "outcome"}, nil)

// Collector exports the counters as the Prometheus counter
// yella_webhook_requests_total{source, outcome}; every outcome of every
// configured source is exported, from zero.
func (h *Handler) Collector() prometheus.Collector { return collector{h.metrics} }

type collector struct{ m *metrics }

// Describe implements prometheus.Collector.
func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- requestsDesc }

// Collect implements prometheus.Collector.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.m.sources {
		for i, o := range outcomes {
			n := c.m.counts[s][i].Load()
			if s == "" && n == 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.CounterValue, float64(n), s, o)
		}
	}
}
