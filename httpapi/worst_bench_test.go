package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/internal/storespy"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// memProbe samples the Go heap in use and the process's resident set every
// 10 ms and keeps the peaks, so a benchmark can report what one request
// cost the server at its worst.
type memProbe struct {
	baseHeap, baseRSS uint64
	peakHeap, peakRSS uint64
	stop              chan struct{}
	done              chan struct{}
}

func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func startProbe() *memProbe {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p := &memProbe{baseHeap: ms.HeapInuse, baseRSS: rss(), stop: make(chan struct{}), done: make(chan struct{})}
	p.peakHeap, p.peakRSS = p.baseHeap, p.baseRSS
	go func() {
		defer close(p.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			p.peakHeap = max(p.peakHeap, ms.HeapInuse)
			p.peakRSS = max(p.peakRSS, rss())
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// report stops the probe and reports the peaks above the baseline in MB.
func (p *memProbe) report(b *testing.B) {
	close(p.stop)
	<-p.done
	const mb = 1 << 20
	b.ReportMetric(float64(p.peakHeap-p.baseHeap)/mb, "peak-heap-MB")
	b.ReportMetric(float64(p.peakRSS-p.baseRSS)/mb, "peak-rss-MB")
}

// worstEngine is a started engine on a SQLite file with n completed runs
// of process "a", behind the API with default options on a real listener.
func worstEngine(b *testing.B, n int) (*yella.Engine, *sqlitestore.Store, *httptest.Server) {
	b.Helper()
	st, err := sqlitestore.Open(filepath.Join(b.TempDir(), "worst.db"), sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 50})
	if err != nil {
		b.Fatal(err)
	}
	eng.Register(yella.Process{Name: "a", On: "ev", Run: func(c *yella.Ctx) yella.Result { return c.OK(map[string]int{"n": 1}) }})
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Stop(ctx) })
	api := httpapi.New(eng, httpapi.Options{})
	srv := httptest.NewServer(api)
	b.Cleanup(func() { api.Close(); srv.Close() })
	for i := range n {
		if _, err := eng.Emit(ctx, "ev", map[string]int{"i": i}); err != nil {
			b.Fatal(err)
		}
	}
	if err := eng.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	return eng, st, srv
}

// deepPayload is depth nested JSON arrays: 2×depth bytes.
func deepPayload(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", depth) + strings.Repeat("]", depth))
}

// getSize reads a response to the end and returns its status and size.
func getSize(b *testing.B, u string) (int, int64) {
	b.Helper()
	resp, err := http.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return resp.StatusCode, n
}

// BenchmarkWorstRequests measures what the worst small requests cost the
// server, as the peak Go heap and resident set above the baseline while
// they run (the server runs in this process):
//
//   - deep-read: GET /api/runs/ID of a run whose 18 KB payload is 9,000
//     nested arrays (stored directly, as data admitted before any depth
//     limit would be), read twice at once;
//   - filter-800: GET /api/runs?limit=1000 with status=completed given
//     800 times, on 2,000 completed runs;
//   - sse-300: 300 clients ask for the full replay of a full event ring
//     (4,096 events) and never read; the probe watches for 5 s;
//   - wide-chain, wide-trace: GET /api/runs/ID/chain and /trace of a
//     fan-out of 1,000 runs with 100 KB payloads each (100 MB in all).
//
// Run it with: go test -run '^$' -bench WorstRequests -benchtime 1x ./httpapi
func BenchmarkWorstRequests(b *testing.B) {
	b.Run("deep-read", func(b *testing.B) {
		_, st, srv := worstEngine(b, 0)
		res, err := st.Admit(context.Background(), store.Admission{Event: "webhook", Payload: deepPayload(9000),
			Runs: []store.NewRun{{ID: "deep-run", Process: "webhook-sink"}}, Now: time.Now()})
		if err != nil || len(res.Admitted) != 1 {
			b.Fatal(res, err)
		}
		for b.Loop() {
			p := startProbe()
			start := time.Now()
			var wg sync.WaitGroup
			sizes := make([]int64, 2)
			codes := make([]int, 2)
			for i := range 2 {
				wg.Go(func() { codes[i], sizes[i] = getSize(b, srv.URL+"/api/runs/deep-run") })
			}
			wg.Wait()
			b.ReportMetric(time.Since(start).Seconds(), "s/2-reads")
			p.report(b)
			b.ReportMetric(float64(sizes[0])/(1<<20), "response-MB")
			b.ReportMetric(float64(codes[0]), "status")
		}
	})
	b.Run("filter-800", func(b *testing.B) {
		_, _, srv := worstEngine(b, 2000)
		q := url.Values{"limit": {"1000"}, "status": {strings.TrimSuffix(strings.Repeat("completed,", 800), ",")}}
		for b.Loop() {
			p := startProbe()
			start := time.Now()
			code, n := getSize(b, srv.URL+"/api/runs?"+q.Encode())
			b.ReportMetric(time.Since(start).Seconds(), "s/read")
			p.report(b)
			b.ReportMetric(float64(n)/(1<<20), "response-MB")
			b.ReportMetric(float64(code), "status")
		}
	})
	for _, c := range []struct{ name, path string }{{"wide-chain", "/chain"}, {"wide-trace", "/trace"}} {
		b.Run(c.name, func(b *testing.B) {
			srv := wideChain(b)
			for b.Loop() {
				p := startProbe()
				start := time.Now()
				code, n := getSize(b, srv.URL+"/api/runs/wide-root"+c.path)
				b.ReportMetric(time.Since(start).Seconds(), "s/read")
				p.report(b)
				b.ReportMetric(float64(n)/(1<<20), "response-MB")
				b.ReportMetric(float64(code), "status")
			}
		})
	}
	b.Run("sse-300", func(b *testing.B) {
		eng, _, srv := worstEngine(b, 0)
		slowSSEClients(b, eng, srv.URL)
	})
}

// wideChain is worstEngine's server with a fan-out of 1,000 runs with
// 100 KB payloads (100 MB in all), rooted at run wide-root.
func wideChain(b *testing.B) *httptest.Server {
	b.Helper()
	_, st, srv := worstEngine(b, 0)
	pay := []byte(`{"pad":"` + strings.Repeat("x", 100<<10) + `"}`)
	if err := storespy.FanOut(context.Background(), st, "wide-root", "webhook-sink", 999, pay); err != nil {
		b.Fatal(err)
	}
	return srv
}

// slowSSEClients fills the engine's event ring (1,400 runs of 3 events:
// the 4,096-event ring is full), then, each iteration, opens 300 SSE
// clients on the server at srvURL that replay from id 1, read their status
// line only and never read again; it reports the memory peaks and how many
// streams the server accepted.
func slowSSEClients(b *testing.B, eng *yella.Engine, srvURL string) {
	b.Helper()
	ctx := context.Background()
	for i := range 1400 {
		if _, err := eng.Emit(ctx, "ev", map[string]int{"i": i}); err != nil {
			b.Fatal(err)
		}
	}
	if err := eng.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	addr := strings.TrimPrefix(srvURL, "http://")
	for b.Loop() {
		p := startProbe()
		accepted := 0
		var conns []net.Conn
		for range 300 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
			fmt.Fprintf(c, "GET /api/events HTTP/1.1\r\nHost: %s\r\nLast-Event-ID: 1\r\n\r\n", addr)
			// Read the status line only (16 bytes at a time), then never again.
			line, err := bufio.NewReaderSize(c, 16).ReadString('\n')
			if err == nil && strings.Contains(line, " 200 ") {
				accepted++
			}
		}
		time.Sleep(5 * time.Second)
		p.report(b)
		b.ReportMetric(float64(accepted), "accepted")
		for _, c := range conns {
			c.Close()
		}
	}
}
