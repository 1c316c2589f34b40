package pgstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/tools/crashtest"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// cutFor is how long TestConnectionCut keeps the database unreachable.
const cutFor = 10 * time.Second

// TestConnectionCut puts a TCP proxy between an engine under load and the
// database and cuts every connection through it for 10 s, refusing new
// ones. The engine must report the outage (StoreHealth down, one log line
// as it starts and one as it ends), must not spin (its claims and
// connection attempts during the cut are bounded by its backoff), and must
// resume on its own: every admission it acknowledged, before, during or
// after the cut, reaches a terminal state, none completes twice, no
// completed effect body runs again, and runs admitted after the cut
// complete, without any restart of the engine.
func TestConnectionCut(t *testing.T) {
	dbURL := pgURL(t)
	px := startProxy(t, dbURL)
	r := startOutageRig(t, px.url, dbURL)
	r.waitCompleted(t, 50)

	claims0 := r.st.claims.Load()
	cutAt := time.Now() // before the cut: the engine may see it fail before cut returns
	px.cut()
	time.Sleep(cutFor)
	h := r.eng.StoreHealth()
	claims, refused := r.st.claims.Load()-claims0, px.refused.Load()
	px.restore()
	restored := time.Now()
	if h.Up {
		t.Errorf("after %v without a database the engine reports its store up: %+v", cutFor, h)
	} else if h.Since.Before(cutAt) {
		t.Errorf("the store reported down since %v, before the cut at %v", h.Since, cutAt)
	}
	back := r.waitUp(t)
	r.finish(t, restored)

	// Backoff: the claim loop waits 100 ms doubling to 5 s between failed
	// claims, the poll wakes it about once a second: about 20 claims in
	// 10 s. Connections: the claims, heartbeats, retried writes (each
	// finished attempt's outcome, with backoff), the listener and the
	// emitters' own retries.
	if claims > 50 {
		t.Errorf("%d claims during the %v cut: the engine spins", claims, cutFor)
	}
	if refused > 1000 {
		t.Errorf("%d connection attempts during the %v cut: the engine spins", refused, cutFor)
	}
	t.Logf("cut %v: the engine made %d claims and %d connection attempts while cut, reported the store down (%s), up again %v after the restore; %s",
		cutFor, claims, refused, h.LastError, back.Sub(restored).Round(time.Millisecond), r.summary)
}

// TestDatabaseRestart restarts the PostgreSQL server under an engine's load
// with pg_ctl restart -m immediate (every backend killed, crash recovery at
// start). It needs a cluster of its own: it starts one with .ci/postgres
// (skipping when PostgreSQL's server binaries are not installed) and
// removes it at the end. The engine must report the outage and resume on
// its own, with the crash invariants holding, as in TestConnectionCut.
func TestDatabaseRestart(t *testing.T) {
	if os.Getenv("YELLA_PG_URL") == "" {
		t.Skip("YELLA_PG_URL is not set: the PostgreSQL tests skip")
	}
	cl := startCluster(t)
	r := startOutageRig(t, cl.url, cl.url)
	r.waitCompleted(t, 50)
	restartAt := time.Now()
	cl.restartImmediate(t)
	restarted := time.Now()
	// The engine notices at its next claim, heartbeat or write.
	waitUntil(t, "the engine reporting the restart", 30*time.Second, func() bool { return r.eng.StoreHealth().Outages > 0 })
	back := r.waitUp(t)
	r.finish(t, restarted)
	t.Logf("pg_ctl restart -m immediate took %v; the engine reported the store down and was up again %v after the restart; %s",
		restarted.Sub(restartAt).Round(time.Millisecond), back.Sub(restarted).Round(time.Millisecond), r.summary)
}

// outageRig is an engine with one effect per run, under the load of two
// emitters that acknowledge each admission (to acks.txt) once Emit
// returned, and retry a failed one with backoff under the same key.
type outageRig struct {
	dir    string
	st     *claimCounter
	eng    *yella.Engine
	logs   *lockedBuffer
	url    string // the database, for the checks: not through the proxy
	schema string
	stop   chan struct{}
	// stopEngine stops the emitters and the engine.
	stopEngine func()
	emitWG     sync.WaitGroup
	emitErr    atomic.Int64
	summary    string
}

// claimCounter counts the engine's claims.
type claimCounter struct {
	*pgstore.Store
	claims atomic.Int64
}

func (c *claimCounter) ClaimNext(ctx context.Context, req store.ClaimNextRequest) (store.ClaimNextResult, error) {
	c.claims.Add(1)
	return c.Store.ClaimNext(ctx, req)
}

func startOutageRig(t *testing.T, engineURL, checkURL string) *outageRig {
	t.Helper()
	dir := t.TempDir()
	opts := pgstore.Options{Schema: schemaFor(dir)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, engineURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &outageRig{dir: dir, st: &claimCounter{Store: st}, logs: &lockedBuffer{}, url: checkURL, schema: opts.Schema, stop: make(chan struct{})}
	t.Cleanup(func() {
		st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pgstore.DropSchema(ctx, checkURL, opts); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	witness := filepath.Join(dir, "witness.jsonl")
	r.eng, err = yella.New(yella.Config{Store: r.st, Concurrency: 8, Logger: slog.New(slog.NewTextHandler(r.logs, nil)),
		Retry: &yella.Retry{Max: 30, Backoff: yella.Fixed(10 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	err = r.eng.Register(yella.Process{Name: "job", On: "job", Run: func(c *yella.Ctx) yella.Result {
		_, err := yella.Effect(c, "charge", func(context.Context) (string, error) {
			line, _ := json.Marshal(crashtest.WitnessLine{Run: c.RunID(), Key: yella.MakeKey("charge").String(), Attempt: c.Attempt(), PID: os.Getpid()})
			if err := crashtest.AppendLine(witness, string(line)); err != nil {
				return "", err
			}
			time.Sleep(20 * time.Millisecond)
			return "receipt", nil
		})
		if err != nil {
			return c.Error(err)
		}
		return c.OK(nil)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			r.stopEmitters()
			r.eng.Stop(context.Background())
		}
	})
	acks := filepath.Join(dir, "acks.txt")
	for e := range 2 {
		r.emitWG.Add(1)
		go func() {
			defer r.emitWG.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("k-%d-%d", e, i)
				for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, err := r.eng.Emit(ctx, "job", map[string]int{"i": i}, yella.IdempotencyKey(key))
					cancel()
					if err == nil {
						break
					}
					r.emitErr.Add(1)
					select {
					case <-r.stop:
						return // not acknowledged: may or may not be admitted
					case <-time.After(wait):
					}
				}
				if err := crashtest.AppendLine(acks, key); err != nil {
					panic(err)
				}
				select {
				case <-r.stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
	}
	r.stopEngine = func() {
		stopped = true
		r.stopEmitters()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.eng.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	}
	return r
}

func (r *outageRig) stopEmitters() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.emitWG.Wait()
}

// completedSince counts the runs completed after at (the engine's clock
// is this machine's).
func (r *outageRig) completedSince(t *testing.T, at time.Time) int {
	t.Helper()
	db := sqlDB(t, r.url, r.schema)
	var n int
	if err := db.QueryRow("SELECT count(*) FROM runs WHERE status = 'completed' AND completed_at > $1", at.UnixNano()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (r *outageRig) waitCompleted(t *testing.T, n int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d completed runs", n), time.Minute, func() bool { return r.completedSince(t, time.Time{}) >= n })
}

// waitUp waits until the engine reports its store up again, and returns
// when.
func (r *outageRig) waitUp(t *testing.T) time.Time {
	t.Helper()
	waitUntil(t, "the engine reporting its store up", time.Minute, func() bool { return r.eng.StoreHealth().Up })
	return time.Now()
}

// finish lets the load run on after the outage, then stops the emitters,
// waits for every run to end, stops the engine and checks the
// invariants, the outage's log lines and that runs completed after it.
func (r *outageRig) finish(t *testing.T, after time.Time) {
	t.Helper()
	time.Sleep(2 * time.Second) // load after the outage
	r.stopEmitters()
	db := sqlDB(t, r.url, r.schema)
	waitTerminal(t, db, 2*time.Minute)
	resumed := r.completedSince(t, after)
	if resumed == 0 {
		t.Error("no run completed after the outage: the engine did not resume")
	}
	h := r.eng.StoreHealth()
	r.stopEngine()
	rep := checkInvariants(t, db, r.dir)
	if rep.Acked == 0 {
		t.Error("no admission was acknowledged: the test shows nothing")
	}
	if h.Outages == 0 || !h.Up {
		t.Errorf("the engine did not report the outage and its end: %+v", h)
	}
	starts, ends := r.logs.count("store unreachable"), r.logs.count("store reachable again")
	if int64(starts) != h.Outages || int64(ends) != h.Outages {
		t.Errorf("%d outage-start and %d outage-end log lines for %d outages; want one of each per outage", starts, ends, h.Outages)
	}
	if n := r.logs.count("internal error"); n > 0 {
		t.Errorf("%d internal-error log lines: store failures should be logged once per outage, not per retry:\n%s", n, r.logs.String())
	}
	r.summary = fmt.Sprintf("%s; %d outage(s) reported (%d failed store calls retried, one log line at each end), %d emit retries, %d runs completed after the outage",
		rep, h.Outages, h.Failures, r.emitErr.Load(), resumed)
}

// lockedBuffer collects an engine's log lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (b *lockedBuffer) count(s string) int { return strings.Count(b.String(), s) }

func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// proxy forwards TCP connections from a local port to the database. cut
// closes every connection and refuses (accepts and closes at once,
// counted in refused) new ones until restore.
type proxy struct {
	url     string // the database URL through the proxy
	target  string
	ln      net.Listener
	refused atomic.Int64

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, dbURL string) *proxy {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: u.Host, ln: ln, conns: map[net.Conn]bool{}}
	u.Host = ln.Addr().String()
	p.url = u.String()
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			p.refused.Add(1)
			c.Close()
			continue
		}
		p.conns[c] = true
		p.wg.Add(1)
		p.mu.Unlock()
		go p.forward(c)
	}
}

func (p *proxy) forward(c net.Conn) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	p.mu.Lock()
	if err != nil || p.down {
		p.mu.Unlock()
		c.Close()
		if s != nil {
			s.Close()
		}
		return
	}
	p.conns[s] = true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(s, c)
	go pipe(c, s)
	<-done
	c.Close()
	s.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
	p.refused.Store(0)
}

// cluster is a throwaway PostgreSQL cluster started by .ci/postgres.
type cluster struct {
	url, dir string
}

// startCluster starts a throwaway cluster, removed when the test ends, or
// skips the test when PostgreSQL's server binaries are not installed.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	if bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(bins) == 0 {
		if _, err := exec.LookPath("pg_ctl"); err != nil {
			t.Skip("no PostgreSQL server binaries (pg_ctl): the database restart test needs a cluster of its own")
		}
	}
	script, err := filepath.Abs("../../.ci/postgres")
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf(".ci/postgres: %v\n%s", err, stderr.String())
	}
	cl := &cluster{}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "export YELLA_PG_URL="); ok {
			cl.url = strings.Trim(v, "'")
		}
		if v, ok := strings.CutPrefix(l, "export YELLA_PG_DIR="); ok {
			cl.dir = strings.Trim(v, "'")
		}
	}
	if cl.url == "" || cl.dir == "" {
		t.Fatalf(".ci/postgres printed no URL and directory: %s", out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(script, "stop", cl.dir).CombinedOutput(); err != nil {
			t.Errorf(".ci/postgres stop: %v\n%s", err, out)
		}
	})
	return cl
}

// restartImmediate runs pg_ctl restart -m immediate on the cluster: every
// server process is killed without a checkpoint, and the server recovers
// from its WAL as it starts again.
func (cl *cluster) restartImmediate(t *testing.T) {
	t.Helper()
	bin, err := os.ReadFile(filepath.Join(cl.dir, "bindir"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(strings.TrimSpace(string(bin)), "pg_ctl"), "-D", filepath.Join(cl.dir, "data"),
		"-l", filepath.Join(cl.dir, "server.log"), "-m", "immediate", "-w", "-t", "60", "restart"}
	if os.Geteuid() == 0 { // the server refuses to run as root: .ci/postgres made the postgres user own the cluster
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl restart -m immediate: %v\n%s", err, out)
	}
}

// TestLostClaimHandedBack: a claim that commits but whose answer is lost
// (the connection breaks after the COMMIT, as in a restart or a cut)
// leaves a run held by a live node that never received it; the node's
// heartbeat finds it and hands it back, and it runs. Without that, its
// own heartbeats renew its lease for as long as it lives.
func TestLostClaimHandedBack(t *testing.T) {
	dir := t.TempDir()
	st := openIn(t, dir, pgstore.Options{})
	eng, err := yella.New(yella.Config{Store: st, HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register(yella.Process{Name: "job", On: "job", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	ctx := context.Background()
	em, err := eng.Emit(ctx, "job", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The claim whose answer is lost: made for the node, never seen by it.
	now := time.Now()
	res, err := st.ClaimNext(ctx, store.ClaimNextRequest{Owner: eng.Owner(), Now: now, LeaseUntil: now.Add(time.Minute), Processes: map[string]int{"job": 0}, Limit: 1})
	if err != nil || len(res.Runs) != 1 {
		t.Fatalf("claim: %v %+v", err, res)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	waitUntil(t, "the lost claim's run to complete", 30*time.Second, func() bool {
		r, err := eng.Run(ctx, em.Runs[0])
		return err == nil && r.Status == yella.StatusCompleted
	})
}
