package llm

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts a Client's calls, tokens and cost as Prometheus counters.
// Register it with a prometheus.Registerer and give it to Config.Metrics
// (several clients may share one). Every call that reaches the API counts,
// including an effect re-run after a crash (the provider charged for it);
// a replayed completion does not. The model label is Request.Model.
//
//	yella_llm_requests_total{model,outcome}  outcome: ok, rate_limited, retryable, permanent
//	yella_llm_tokens_total{model,kind}       kind: prompt, completion
//	yella_llm_cost_usd_total{model}          from Config.Prices
type Metrics struct {
	requests *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	cost     *prometheus.CounterVec
}

// NewMetrics returns counters at zero.
func NewMetrics() *Metrics {
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "yella_llm_requests_total",
			Help: "Chat completion calls by model and outcome (ok, rate_limited, retryable, permanent)."}, []string{"model", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "yella_llm_tokens_total",
			Help: "Tokens used by chat completions, by model and kind (prompt, completion)."}, []string{"model", "kind"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "yella_llm_cost_usd_total",
			Help: "Cost of chat completions in US dollars, by model, from the configured prices."}, []string{"model"}),
	}
}

// Describe sends the descriptions of the counters.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.tokens.Describe(ch)
	m.cost.Describe(ch)
}

// Collect sends the counters' values.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.tokens.Collect(ch)
	m.cost.Collect(ch)
}

// record counts a successful call.
func (m *Metrics) record(model string, c Completion) {
	m.requests.WithLabelValues(model, "ok").Inc()
	// A counter panics on a negative increase: a server's nonsense counts 0.
	m.tokens.WithLabelValues(model, "prompt").Add(float64(max(c.Usage.PromptTokens, 0)))
	m.tokens.WithLabelValues(model, "completion").Add(float64(max(c.Usage.CompletionTokens, 0)))
	if c.CostUSD > 0 {
		m.cost.WithLabelValues(model).Add(c.CostUSD)
	} else {
		m.cost.WithLabelValues(model).Add(0)
	}
}
