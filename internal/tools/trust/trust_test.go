//go:build trust

package trust

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella/internal/tools/bench"
	"github.com/yella-go/yella/internal/tools/crashtest"
	"github.com/yella-go/yella/internal/tools/restoredrill"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

var long = flag.Bool("long", false, "run the long forms")

func openStore(kind, path string) (store.Store, error) {
	if kind == "memory" {
		return memstore.New(), nil
	}
	return sqlitestore.Open(path, sqlitestore.Options{})
}

func TestMain(m *testing.M) {
	if crashtest.ChildMain() || bench.ChildMain(openStore) || childMain() || restoredrill.ChildMain() {
		return
	}
	os.Exit(m.Run())
}

// result is a test's record: its invariants and figures.
type result struct {
	Test       string             `json:"test"`
	Long       bool               `json:"long"`
	StartedAt  time.Time          `json:"startedAt"`
	FinishedAt time.Time          `json:"finishedAt"`
	Machine    any                `json:"machine"`
	Invariants []invariant        `json:"invariants"`
	Figures    map[string]float64 `json:"figures"`
	Notes      []string           `json:"notes,omitempty"`
	Pass       bool               `json:"pass"`
}

type invariant struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

func newResult(t *testing.T, name string) *result {
	r := &result{Test: name, Long: *long, StartedAt: time.Now().UTC(), Machine: bench.MachineInfo(), Figures: map[string]float64{}}
	t.Cleanup(func() { r.finish(t) })
	return r
}

// check records an invariant and fails the test if it does not hold.
func (r *result) check(t *testing.T, name string, ok bool, format string, args ...any) {
	t.Helper()
	detail := fmt.Sprintf(format, args...)
	r.Invariants = append(r.Invariants, invariant{name, ok, detail})
	if !ok {
		t.Errorf("invariant %q broken: %s", name, detail)
	}
}

func (r *result) figure(name string, v float64) { r.Figures[name] = v }

func (r *result) finish(t *testing.T) {
	r.FinishedAt = time.Now().UTC()
	r.Pass = !t.Failed()
	for _, inv := range r.Invariants {
		mark := "ok  "
		if !inv.OK {
			mark = "FAIL"
		}
		t.Logf("invariant %s %s: %s", mark, inv.Name, inv.Detail)
	}
	names := make([]string, 0, len(r.Figures))
	for n := range r.Figures {
		names = append(names, n)
	}
	sort.Strings(names)
	var figs []string
	for _, n := range names {
		figs = append(figs, fmt.Sprintf("%s=%g", n, r.Figures[n]))
	}
	t.Logf("figures: %s", strings.Join(figs, " "))
	dir := os.Getenv("TRUST_REPORT_DIR")
	if dir == "" {
		return
	}
	os.MkdirAll(dir, 0o755)
	form := "short"
	if r.Long {
		form = "long"
	}
	path := filepath.Join(dir, fmt.Sprintf("%s__%s__%s.json", r.Test, form, r.FinishedAt.Format("20060102-150405")))
	b, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Errorf("write result: %v", err)
	}
	t.Logf("result written to %s", path)
}

// seedFromEnv is the test's random seed: TRUST_SEED, or the time. It is
// logged and noted in the result so a schedule can be replayed.
func seedFromEnv(t *testing.T, r *result) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TRUST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TRUST_SEED=%q: not an unsigned integer", s)
		}
		seed = v
	}
	t.Logf("reproduce: TRUST_SEED=%d", seed)
	r.Notes = append(r.Notes, fmt.Sprintf("reproduce: TRUST_SEED=%d", seed))
	return seed
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}
