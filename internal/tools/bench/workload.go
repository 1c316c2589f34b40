package bench

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector/browser"
)

// span is a latency range in milliseconds.
type span struct{ lo, hi float64 }

func (s span) scale(f float64) span { return span{s.lo * f, s.hi * f} }
func (s span) draw() time.Duration {
	return time.Duration((s.lo + rand.Float64()*(s.hi-s.lo)) * float64(time.Millisecond))
}

// profile is a latency distribution: base range plus a share of outliers.
type profile struct {
	base        span
	outlierRate float64
	outlier     span
}

func (p profile) draw() time.Duration {
	if rand.Float64() < p.outlierRate {
		return p.outlier.draw()
	}
	return p.base.draw()
}

// forMode is a downstream's latency in mode m: the healthy span (half as
// long again while recovering) or, slow or rate-limited, the degraded one,
// with a share of slow outliers that grows with the trouble (3% healthy,
// 5% recovering, 8% degraded).
func forMode(m Mode, healthy, degraded span) profile {
	switch m {
	case Recovering:
		return profile{healthy.scale(1.5), 0.05, span{1200, 2400}}
	case Slow, RateLimited:
		return profile{degraded, 0.08, span{2000, 5000}}
	}
	return profile{healthy, 0.03, span{800, 1800}}
}

var transientRate = map[Mode]float64{Healthy: 0.02, Slow: 0.04, RateLimited: 0.09, Recovering: 0.03}

var transientErrors = []string{
	"HTTP 429: downstream rate limit", "HTTP 503: downstream unavailable",
	"ETIMEDOUT: downstream timeout", "ECONNRESET: downstream reset connection",
}

func transient() error { return errors.New(transientErrors[rand.IntN(len(transientErrors))]) }

// Workload registers the scenario's processes and makes its seed events.
type Workload struct {
	scn  Scenario
	mode atomic.Value // Mode
	// zero makes every handler and effect instant (capacity family).
	zero bool

	witnessMu sync.Mutex
	witness   *os.File // effect executions, one JSON line each (optional)

	// DeferApprovals makes the approval stage defer its follow-up
	// (approval:completed) until someone resumes the run, as a real
	// approval gate does, instead of completing it at once. The demo of
	// "yella serve" sets it; the benchmark scenarios leave it off. Set it
	// before Register.
	DeferApprovals bool

	// The real-browser scraper's site and pool (Scenario.Browser).
	site *scrapeSite
	pool *browser.Pool
}

// NewWorkload builds the workload of s. If witness is not nil every effect
// body execution is appended to it.
func NewWorkload(s Scenario, witness *os.File) *Workload {
	w := &Workload{scn: s, zero: s.Saturate, witness: witness}
	w.mode.Store(Healthy)
	return w
}

// SetMode switches the downstreams' health.
func (w *Workload) SetMode(m Mode) {
	if m == "" {
		return
	}
	w.mode.Store(m)
}

func (w *Workload) current() Mode { return w.mode.Load().(Mode) }

// sleep waits d unless the run is cancelled.
func (w *Workload) sleep(c context.Context, d time.Duration) error {
	if w.zero || d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.Done():
		return c.Err()
	}
}

func (w *Workload) record(run, key string) {
	if w.witness == nil {
		return
	}
	line, _ := json.Marshal(map[string]string{"run": run, "key": key})
	w.witnessMu.Lock()
	w.witness.Write(append(line, '\n'))
	w.witnessMu.Unlock()
}

// effect runs a durable effect that takes a profile's time.
func effect[T any](w *Workload, c *yella.Ctx, key yella.Key, p profile, out T) (T, error) {
	return yella.Effect(c, key, func(ctx context.Context) (T, error) {
		w.record(c.RunID(), key.String())
		if err := w.sleep(ctx, p.draw()); err != nil {
			var zero T
			return zero, err
		}
		return out, nil
	})
}

func hexID(prefix string) string {
	var b [6]byte
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return prefix + "_" + hex.EncodeToString(b[:])
}

type payload = map[string]any

func str(p payload, k string) string { s, _ := p[k].(string); return s }

// step is one process of the workload: the event it handles, the
// follow-ups it declares, its handler in a downstream mode and its cap.
type step struct {
	name, on string
	emits    []string // declared follow-ups (the graph)
	run      func(c *yella.Ctx, in payload, m Mode) yella.Result
	cap      int
}

// fixed is a latency that does not depend on the downstreams' mode.
func fixed(lo, hi float64) profile { return profile{base: span{lo, hi}} }

// Register adds the workload's processes to eng: the four chains of the
// API mix and, in scraper scenarios, the scraper's.
func (w *Workload) Register(eng *yella.Engine) error {
	steps := slices.Concat(w.webhookSteps(), w.billingSteps(), w.documentSteps(), w.approvalSteps())
	if sc := w.scn.Scraper; sc != nil {
		steps = append(steps, w.scraperSteps(sc)...)
	}
	// The follow-up each step emits, for the capacity family's instant
	// steps. approval-stage emits approval:completed without declaring it
	// (its Emits is nil), as the published workload does: the graph matches
	// that workload's, and an undeclared follow-up, which must still work,
	// stays exercised.
	follow := map[string]string{"webhook-validate": "webhook:validated", "crm-upsert": "webhook:synced",
		"billing-reconcile": "billing:reconciled", "document-extract": "document:indexed",
		"approval-stage": "approval:completed", "browser-scrape": "page:scraped"}
	retry := &yella.Retry{Max: w.scn.Retry.Max, Backoff: yella.Exponential(w.scn.Retry.Base)}
	for _, st := range steps {
		run, then := st.run, follow[st.name]
		err := eng.Register(yella.Process{
			// Drop beyond a cap (not Yella's default, a bounded queue):
			// the scraper scenarios are compared with the TypeScript
			// engine's published figures, which count the seeds it
			// dropped at the cap, so they must drop the same way.
			Name: st.name, On: st.on, Emits: st.emits, Concurrency: st.cap, Overflow: yella.Drop, Retry: retry,
			Run: yella.Handle(func(c *yella.Ctx, in payload) yella.Result {
				m := w.current()
				if w.zero { // capacity: the same shape, no latency, no failures
					return zeroStep(c, in, then)
				}
				return run(c, in, m)
			}),
		})
		if err != nil {
			return fmt.Errorf("register %s: %w", st.name, err)
		}
	}
	return nil
}

// webhookSteps is the webhook chain: validate, upsert into the CRM (an
// effect), notify ops.
func (w *Workload) webhookSteps() []step {
	return []step{
		{"webhook-validate", "webhook:received", []string{"webhook:validated"}, func(c *yella.Ctx, in payload, m Mode) yella.Result {
			if err := w.sleep(c, profile{span{8, 35}, 0.01, span{300, 700}}.draw()); err != nil {
				return c.Error(err)
			}
			c.SetContext("tenantId", in["tenantId"])
			if rand.Float64() < pick(m == RateLimited, 0.015, 0.01) {
				return c.Fail(errors.New("schema rejected payload"))
			}
			return c.OK(in, yella.Then("webhook:validated"))
		}, 0},
		{"crm-upsert", "webhook:validated", []string{"webhook:synced"}, func(c *yella.Ctx, in payload, m Mode) yella.Result {
			if err := w.sleep(c, forMode(m, span{140, 420}, span{320, 1200}).draw()); err != nil {
				return c.Error(err)
			}
			if rand.Float64() < transientRate[m] {
				return c.Error(transient())
			}
			if rand.Float64() < pick(m == RateLimited, 0.007, 0.003) {
				return c.Fail(errors.New("crm rejected the write"))
			}
			id := str(in, "customerId")
			if id == "" {
				id = c.RunID()
			}
			out, err := effect(w, c, yella.MakeKey("crm-upsert", id), forMode(m, span{80, 220}, span{180, 480}), payload{"remoteId": hexID("crm")})
			if err != nil {
				return c.Error(err)
			}
			return c.OK(out, yella.Then("webhook:synced"))
		}, 0},
		{"ops-notify", "webhook:synced", nil, func(c *yella.Ctx, in payload, m Mode) yella.Result {
			if err := w.sleep(c, forMode(m, span{30, 90}, span{120, 300}).draw()); err != nil {
				return c.Error(err)
			}
			if rand.Float64() < pick(m == RateLimited, 0.03, 0.01) {
				return c.Error(transient())
			}
			return c.OK(nil)
		}, 0},
	}
}

// billingSteps is the billing chain: reconcile (an effect fetching the
// invoice), then audit.
func (w *Workload) billingSteps() []step {
	return []step{
		{"billing-reconcile", "billing:sync-requested", []string{"billing:reconciled"}, func(c *yella.Ctx, in payload, m Mode) yella.Result {
			if err := w.sleep(c, forMode(m, span{180, 520}, span{400, 1400}).draw()); err != nil {
				return c.Error(err)
			}
			if rand.Float64() < transientRate[m] {
				return c.Error(transient())
			}
			out, err := effect(w, c, yella.MakeKey("billing-fetch", str(in, "invoiceId")), forMode(m, span{70, 180}, span{160, 400}), payload{"amount": 100 + rand.IntN(9900)})
			if err != nil {
				return c.Error(err)
			}
			return c.OK(out, yella.Then("billing:reconciled"))
		}, 0},
		{"billing-audit", "billing:reconciled", nil, func(c *yella.Ctx, in payload, m Mode) yella.Result {
			if err := w.sleep(c, fixed(35, 110).draw()); err != nil {
				return c.Error(err)
			}
			if rand.Float64() < 0.002 {
				return c.Fail(errors.New("audit policy rejected reconciliation"))
			}
			return c.OK(nil)
		}, 0},
	}
}

// documentSteps is the document chain: extract (an effect), then refresh
// the search index.
func (w *Workload) documentSteps() []step {
	return []step{
		{"document-extract", "document:index-requested", []string{"document:indexed"}, func(c *yella.Ctx, in payload, m Mode) yella.Result {
			if err := w.sleep(c, forMode(m, span{90, 260}, span{200, 700}).draw()); err != nil {
				return c.Error(err)
			}
			if rand.Float64() < pick(m == RateLimited, 0.04, 0.015) {
				return c.Error(transient())
			}
			out, err := effect(w, c, yella.MakeKey("extract", str(in, "documentId")), forMode(m, span{60, 140}, span{150, 280}), payload{"embeddings": 8})
			if err != nil {
				return c.Error(err)
			}
			return c.OK(out, yella.Then("document:indexed"))
		}, 0},
		{"search-refresh", "document:indexed", nil, func(c *yella.Ctx, in payload, m Mode) yella.Result {
			if err := w.sleep(c, fixed(25, 70).draw()); err != nil {
				return c.Error(err)
			}
			return c.OK(nil)
		}, 0},
	}
}

// approvalSteps is the approval chain: the stage (deferred until resumed
// with DeferApprovals), then the finish.
func (w *Workload) approvalSteps() []step {
	return []step{
		{"approval-stage", "approval:needed", nil, func(c *yella.Ctx, in payload, m Mode) yella.Result {
			if err := w.sleep(c, fixed(15, 45).draw()); err != nil {
				return c.Error(err)
			}
			if w.DeferApprovals {
				return c.Defer("approval:completed", in)
			}
			return c.OK(in, yella.Then("approval:completed"))
		}, 0},
		{"approval-finish", "approval:completed", nil, func(c *yella.Ctx, in payload, m Mode) yella.Result {
			if err := w.sleep(c, fixed(20, 60).draw()); err != nil {
				return c.Error(err)
			}
			return c.OK(nil)
		}, 0},
	}
}

// scraperSteps is the scraper chain: a browser-style scrape that holds
// sc.MB of touched memory while it runs (or, with Scenario.Browser, loads
// the page in Chromium), capped at sc.Cap, then a follow-up.
func (w *Workload) scraperSteps(sc *Scraper) []step {
	return []step{
		{"browser-scrape", "page:scrape-requested", []string{"page:scraped"}, func(c *yella.Ctx, in payload, m Mode) yella.Result {
			if w.pool != nil {
				return w.browserScrape(c, in)
			}
			mem := make([]byte, sc.MB<<20)
			for i := 0; i < len(mem); i += 4096 {
				mem[i] = 1 // touch every page, as a browser would
			}
			if err := w.sleep(c, forMode(m, span{700, 1300}, span{1400, 3200}).draw()); err != nil {
				return c.Error(err)
			}
			if rand.Float64() < pick(m == RateLimited, 0.05, 0.02) {
				return c.Error(transient())
			}
			sum := sha1.Sum(mem[:2048])
			out, err := effect(w, c, yella.MakeKey("browser-store", str(in, "url")), profile{base: span{120, 260}}, payload{"hash": hex.EncodeToString(sum[:])[:12]})
			if err != nil {
				return c.Error(err)
			}
			mem[len(mem)-1] = 2 // keep the buffer alive through the effect
			return c.OK(out, yella.Then("page:scraped"))
		}, sc.Cap},
		{"page-followup", "page:scraped", nil, func(c *yella.Ctx, in payload, m Mode) yella.Result {
			if err := w.sleep(c, fixed(30, 90).draw()); err != nil {
				return c.Error(err)
			}
			return c.OK(nil)
		}, 0},
	}
}

// zeroStep is a step of the capacity family: instant, with the effect and
// the follow-up of the real step.
func zeroStep(c *yella.Ctx, in payload, then string) yella.Result {
	if then == "" {
		return c.OK(nil)
	}
	if _, err := yella.Effect(c, "work", func(context.Context) (int, error) { return 1, nil }); err != nil {
		return c.Error(err)
	}
	return c.OK(in, yella.Then(then))
}

func pick(cond bool, a, b float64) float64 {
	if cond {
		return a
	}
	return b
}

// Seed is one seed event.
type Seed struct {
	Event   string
	Payload payload
}

// weighted picks by weight.
func weighted[T any](items []T, weights []int) T {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := rand.IntN(total)
	for i, w := range weights {
		if n < w {
			return items[i]
		}
		n -= w
	}
	return items[len(items)-1]
}

// NextSeed draws a seed event: webhooks, billing syncs, document indexing
// and approvals weighted 5:3:2:1 (the published API mix), plus scrapes at
// the scenario's weight.
func (w *Workload) NextSeed() Seed {
	events := []string{"webhook:received", "billing:sync-requested", "document:index-requested", "approval:needed"}
	weights := []int{5, 3, 2, 1}
	if sc := w.scn.Scraper; sc != nil {
		events, weights = append(events, "page:scrape-requested"), append(weights, sc.Weight)
	}
	ev := weighted(events, weights)
	var p payload
	switch ev {
	case "webhook:received":
		p = payload{"tenantId": hexID("ten"), "customerId": hexID("cus"),
			"eventType": weighted([]string{"customer.updated", "subscription.updated", "invoice.paid"}, []int{6, 2, 1})}
	case "billing:sync-requested":
		p = payload{"accountId": hexID("acct"), "invoiceId": hexID("inv"), "source": weighted([]string{"stripe", "paddle"}, []int{4, 1})}
	case "document:index-requested":
		p = payload{"documentId": hexID("doc"), "sizeKb": 40 + rand.IntN(1361), "source": weighted([]string{"email", "upload", "notion"}, []int{3, 2, 1})}
	case "approval:needed":
		p = payload{"approvalId": hexID("apr"), "actor": weighted([]string{"ops", "finance"}, []int{2, 1})}
	default:
		var b [3]byte
		for i := range b {
			b[i] = byte(rand.IntN(256))
		}
		p = payload{"tenantId": hexID("ten"), "url": "https://example.com/" + hex.EncodeToString(b[:]),
			"waitUntil": weighted([]string{"networkidle", "load"}, []int{4, 1})}
	}
	return Seed{Event: ev, Payload: p}
}
