package dashboard

import (
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/yella-go/yella"
)

// limitsTop bounds the waiting keys the limits page lists per limit.
const limitsTop = 20

type limitsData struct {
	layout
	Local bool
	Rate  []rateRow
	Key   []keyRow
	Top   int
	// RateLimited and KeyLimited are the engine's counts of the runs
	// held back (DispatcherMetrics).
	RateLimited, KeyLimited int
}

// rateRow is a rate limit with links to its processes' waiting runs.
type rateRow struct {
	yella.RateLimitState
	Procs []procLink
	More  bool // the list of keys stopped at limitsTop
}

// keyRow is a per-key concurrency bound with links to its processes'
// waiting runs.
type keyRow struct {
	yella.KeyLimitState
	Procs []procLink
	More  bool
}

// procLink is a process with the link to its waiting (idle) runs.
type procLink struct {
	Name string
	URL  string
}

func procLinks(names []string) []procLink {
	out := make([]procLink, len(names))
	for i, n := range names {
		out[i] = procLink{Name: n, URL: runsFilter{Process: n, Status: yella.StatusIdle, Limit: defPageLimit}.url("/runs")}
	}
	return out
}

// limits is the limits page: every rate limit and per-key concurrency
// bound the engine's processes declare, with the keys holding runs back;
// when none is declared, a note that says so.
func (s *server) limits(w http.ResponseWriter, r *http.Request) {
	d := &limitsData{layout: s.newLayout(r, "limits", "Limits"), Top: limitsTop}
	m, err := s.eng.Metrics(r.Context())
	if err != nil {
		s.engineError(w, r, err)
		return
	}
	d.RateLimited, d.KeyLimited = m.Dispatcher.RateLimited, m.Dispatcher.KeyLimited
	lim := s.eng.Limits(limitsTop)
	d.Local = lim.Local
	for _, rl := range lim.Rate {
		d.Rate = append(d.Rate, rateRow{RateLimitState: rl, Procs: procLinks(rl.Processes), More: len(rl.Waiting) == limitsTop})
	}
	for _, kl := range lim.Key {
		d.Key = append(d.Key, keyRow{KeyLimitState: kl, Procs: procLinks(kl.Processes), More: len(kl.Waiting) == limitsTop})
	}
	s.render(w, r, http.StatusOK, "limits", d)
}

// flowKey shows a flow-control key as it is when it is plain, else quoted
// in Go syntax: the empty key (a limit without a key function has only
// that one), and keys with spaces or control characters, which would
// otherwise not show.
func flowKey(k string) string {
	if k == "" || strings.ContainsFunc(k, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) || r == '"' }) {
		return strconv.Quote(k)
	}
	return k
}
