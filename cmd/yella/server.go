package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector/webhook"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/httpguard"
	"github.com/yella-go/yella/prommetrics"
	"github.com/yella-go/yella/replicate"
	"github.com/yella-go/yella/store"
)

// server is one "yella serve": what it opened and decided, in the order
// it must be closed.
type server struct {
	c    *serveConfig
	log  *slog.Logger
	cert *tls.Certificate

	st                    store.Store
	stats                 func() prommetrics.WriterStats
	facts                 dbFacts
	demoOn                bool
	demoWhy, retentionWhy string

	rep    *replicate.Replicator
	eng    *yella.Engine
	api    *httpapi.API
	hooks  *webhook.Handler // nil without --hook
	prom   *prommetrics.Exporter
	secret string // of the server record; "" when read-only
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := serveFlags(stdout)
	pos, err := parse(c.fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("serve takes no arguments, got %q", strings.Join(pos, " "))
	}
	if err := c.validate(); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return usagef("invalid --log-level %q", c.logLevel)
	}
	s := &server{c: c, log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))}
	defer s.close()
	if err := s.open(ctx); err != nil {
		return err
	}
	handler, err := s.handler()
	if err != nil {
		return err
	}
	return s.run(ctx, handler, stdout)
}

// open loads the TLS certificate, opens the store, decides the demo and
// the retention, starts replication and builds the engine.
func (s *server) open(ctx context.Context) error {
	c := s.c
	if c.tlsCert != "" {
		kp, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		s.cert = &kp
	}
	var target replicate.Target
	if c.replicate != "" {
		var err error
		if target, err = replicate.ParseURL(c.replicate); err != nil {
			return usagef("--replicate: %v", err)
		}
		c.replicateShown = fmt.Sprint(target)
	}
	st, stats, created, err := c.openStore(ctx, s.log)
	if err != nil {
		return err
	}
	s.st, s.stats = st, stats
	if s.facts, err = c.facts(ctx, st, created); err != nil {
		return fmt.Errorf("inspect %s: %w", redactURL(c.db), err)
	}
	var retention time.Duration
	s.demoOn, s.demoWhy = demoDecision(c, s.facts)
	retention, s.retentionWhy = retentionDecision(c, s.facts)
	if c.replicate != "" {
		if s.rep, err = replicate.Start(ctx, c.db, target, replicate.Options{SyncInterval: c.replInterval, Logger: s.log}); err != nil {
			return fmt.Errorf("replication: %w", err)
		}
	}
	cfg := yella.Config{Store: st, Concurrency: c.concurrency, Retention: retention, Logger: s.log}
	if c.pg {
		cfg.Owner = nodeOwner() // a node among other servers' on the database
	}
	if s.eng, err = yella.New(cfg); err != nil {
		return err
	}
	if s.demoOn {
		return registerDemo(s.eng)
	}
	return nil
}

// handler is the main listener's handler: the API, /metrics and the
// dashboard behind the guard (and refusing changes when read-only), and
// the identity route of the server record outside the token check.
func (s *server) handler() (http.Handler, error) {
	c, rep := s.c, s.rep
	aopts := httpapi.Options{Version: versionString(), Logger: s.log, QueryTimeout: c.queryTimeout, MaxResponseBytes: c.maxResponse,
		MaxHeavyReads: c.heavyReads, MaxSubscribers: c.streams}
	popts := prommetrics.Options{
		Writer:    s.stats,
		Gatherers: []prometheus.Gatherer{prometheus.DefaultGatherer},
	}
	dopts := dashboard.Options{Logger: s.log, ReadTimeout: c.queryTimeout}
	if len(c.hookSpecs) > 0 {
		var err error
		if s.hooks, err = webhooks(s.eng, c.hookSpecs, s.demoOn, webhook.Options{Logger: s.log}); err != nil {
			return nil, err
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(s.hooks.Collector())
		popts.Gatherers = append(popts.Gatherers, reg)
	}
	if rep != nil {
		aopts.Replication = func() httpapi.ReplicationState {
			st := rep.Status()
			return httpapi.ReplicationState{LastSync: st.LastSync, Lag: st.Lag, LastError: lastErr(st), Stalled: st.Stalled}
		}
		popts.Replication = func() prommetrics.ReplicationState {
			st := rep.Status()
			return prommetrics.ReplicationState{LastSync: st.LastSync, Lag: st.Lag, Stalled: st.Stalled != ""}
		}
		dopts.ReplicationStatus = func() dashboard.ReplicationState {
			st := rep.Status()
			return dashboard.ReplicationState{LastSync: st.LastSync, Lag: st.Lag, LastError: lastErr(st),
				OK: st.ConsecutiveErrors == 0 && !st.LastSync.IsZero(), Stalled: st.Stalled}
		}
	}
	s.api = httpapi.New(s.eng, aopts)
	s.prom = prommetrics.New(s.eng, popts)
	dash, err := dashboard.New(s.eng, dopts)
	if err != nil {
		return nil, err
	}
	gopts := c.guardOptions()
	gopts.Logger = s.log
	if s.hooks != nil {
		gopts.Open = append(gopts.Open, hooksPath) // the signature authenticates
	}
	guard, err := httpguard.New(gopts)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	if s.hooks != nil {
		mux.Handle(hooksPath+"{name}", s.hooks) // every method: the handler answers and counts 405
	}
	mux.Handle("/api/", s.api)
	mux.Handle("GET /metrics", s.prom.Handler())
	mux.Handle("/", dash)
	if c.readOnly {
		return guard.Handler(refuseMutations(mux, "this server is read-only (yella serve --read-only): it changes nothing; "+
			"act through the server that runs the database's engine")), nil
	}
	guarded := guard.Handler(mux)
	if c.pg {
		return guarded, nil // no server record: the CLI opens a shared database itself
	}
	s.secret = newSecret()
	identity := identityHandler(s.secret)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == identityPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			identity.ServeHTTP(w, r) // outside the token check: it reveals nothing
			return
		}
		guarded.ServeHTTP(w, r)
	}), nil
}

// run listens, starts the engine (when it has processes to run) and the
// demo, writes the server record, says what runs, and serves until a
// signal or ctx ends; then it stops in order.
func (s *server) run(ctx context.Context, handler http.Handler, stdout io.Writer) error {
	c := s.c
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	scheme := "http"
	if s.cert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*s.cert}, MinVersion: tls.VersionTLS12}
		scheme = "https"
	}
	sides, sideLines, err := c.sideListeners(s.prom.Handler())
	if err != nil {
		ln.Close()
		return err
	}
	shutdown := func(ctx context.Context) {
		srv.Shutdown(ctx)
		for _, side := range sides {
			side.Shutdown(ctx)
		}
	}
	defer shutdown(context.Background()) // on an early return
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// The engine runs only when it has processes to run (the demo's): a
	// started engine without them would only reclaim other programs'
	// abandoned runs and prune their observability data.
	if s.demoOn {
		if err := s.eng.Start(ctx); err != nil {
			ln.Close()
			return err
		}
	}
	if s.secret != "" {
		rec := serverRecord{PID: os.Getpid(), URL: scheme + "://" + localAddr(ln.Addr()), Secret: s.secret, DB: absPath(c.db), Started: time.Now().UTC()}
		if s.cert != nil {
			sum := sha256.Sum256(s.cert.Certificate[0])
			rec.CertSHA256 = hex.EncodeToString(sum[:])
		}
		if err := writeRecord(c.db, rec); err != nil {
			ln.Close()
			return err
		}
	}
	demoCtx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	if s.demoOn {
		go runDemo(demoCtx, s.eng, c.demoRate)
	}
	serveErr := make(chan error, 1)
	go func() {
		if s.cert != nil {
			serveErr <- srv.ServeTLS(ln, "", "")
			return
		}
		serveErr <- srv.Serve(ln)
	}()
	c.summary(stdout, scheme+"://"+ln.Addr().String(), s.facts, s.demoOn, s.demoWhy, s.retentionWhy, s.cert != nil, sideLines, s.eng.Owner())

	select {
	case sig := <-sigs:
		s.log.Info("shutting down: stopping admissions, finishing running handlers", "signal", sig.String(), "grace", c.grace)
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	// A second signal forces the exit: everything committed is durable,
	// and the next start resumes the rest.
	go func() {
		sig := <-sigs
		s.log.Warn("second signal: exiting now; unfinished runs resume at the next start", "signal", sig.String())
		if s.secret != "" {
			removeRecord(c.db, s.secret)
		}
		os.Exit(130)
	}()
	stopDemo()
	s.api.Close() // ends the SSE streams so Shutdown does not wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	shutdown(sctx)
	cancel()
	if err := s.close(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "yella stopped")
	return nil
}

// close stops what open started, once, in order: the engine (running
// handlers get the grace period), the server record (while the lock is
// still held), the API and exporter, the store, then the replicator, whose
// final sync copies every commit.
func (s *server) close() error {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	if s.eng != nil {
		gctx, cancel := context.WithTimeout(context.Background(), s.c.grace)
		if err := s.eng.Stop(gctx); err != nil && yella.CodeOf(err) != yella.CodeGracefulStopTimeout {
			keep(err)
		}
		cancel()
		s.eng = nil
	}
	if s.secret != "" {
		removeRecord(s.c.db, s.secret)
		s.secret = ""
	}
	if s.api != nil {
		s.api.Close()
		s.api = nil
	}
	if s.prom != nil {
		s.prom.Close()
		s.prom = nil
	}
	if s.st != nil {
		keep(s.st.Close())
		s.st = nil
	}
	if s.rep != nil {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := s.rep.Close(rctx); err != nil {
			keep(fmt.Errorf("replication: the last commits may not be on the replica: %w", err))
		}
		cancel()
		s.rep = nil
	}
	return first
}

// sideListeners starts the metrics and pprof listeners, each behind a
// guard with the Host allowlist and no token.
func (c *serveConfig) sideListeners(metrics http.Handler) ([]*http.Server, []string, error) {
	type side struct {
		addr, name, path string
		h                http.Handler
		hosts            []string
	}
	var sides []side
	if c.metricsAddr != "" {
		sides = append(sides, side{c.metricsAddr, "metrics", "/metrics", metrics, c.sideHosts(c.metricsAddr)})
	}
	if c.pprofAddr != "" {
		pm := http.NewServeMux()
		pm.HandleFunc("/debug/pprof/", pprof.Index)
		pm.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		pm.HandleFunc("/debug/pprof/profile", pprof.Profile)
		pm.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		pm.HandleFunc("/debug/pprof/trace", pprof.Trace)
		sides = append(sides, side{c.pprofAddr, "pprof", "/debug/pprof/", pm, nil}) // nil: loopback names only
	}
	var servers []*http.Server
	var lines []string
	for _, s := range sides {
		g, err := httpguard.New(httpguard.Options{Hosts: s.hosts})
		if err != nil {
			return servers, nil, err
		}
		l, err := net.Listen("tcp", s.addr)
		if err != nil {
			for _, srv := range servers {
				srv.Close()
			}
			return nil, nil, fmt.Errorf("listen %s (--%s-addr): %w", s.addr, s.name, err)
		}
		srv := &http.Server{Handler: g.Handler(s.h), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 2 * time.Minute}
		servers = append(servers, srv)
		go srv.Serve(l)
		lines = append(lines, fmt.Sprintf("%-12s http://%s%s (no token; Host checked)", s.name, l.Addr(), s.path))
	}
	return servers, lines, nil
}

// summary prints what serve runs, one line per aspect, then the line that
// says it serves (last, so that whoever waits for it has read the rest),
// in one write.
func (c *serveConfig) summary(out io.Writer, base string, f dbFacts, engineOn bool, demoWhy, retentionWhy string, tlsOn bool, sides []string, owner string) {
	w := &strings.Builder{}
	defer func() { io.WriteString(out, w.String()) }()
	defer fmt.Fprintf(w, "yella %s serving %s on %s (dashboard, /api/, /metrics)\n", versionString(), redactURL(c.db), base)
	state := "existing, " + plural(int(f.runs), "run", "runs")
	if f.created {
		state = "created now"
	}
	line := func(k, v string) { fmt.Fprintf(w, "  %-12s %s\n", k, v) }
	if c.pg {
		line("database", redactURL(c.db)+", schema "+c.schema+" ("+plural(int(f.runs), "run", "runs")+")")
	} else {
		line("database", absPath(c.db)+" ("+state+")")
	}
	switch {
	case c.readOnly:
		line("engine", "none (--read-only): nothing is claimed, reclaimed, pruned or changed; mutations are refused")
	case !engineOn:
		line("engine", "not started: no processes to run here (the demo is off), so nothing is claimed, reclaimed or pruned; "+
			"actions (retry, cancel, requeue) change the database directly and the runs wait for the engine that has their processes")
	default:
		durability := "sync " + c.sync
		if c.pg {
			durability = "durability PostgreSQL's"
		}
		line("engine", fmt.Sprintf("running the demo's processes, concurrency %d, %s, grace %s; runs of other processes are not executed",
			c.concurrency, durability, shortDuration(c.grace)))
	}
	line("demo", demoWhy)
	line("retention", retentionWhy)
	if len(c.hookSpecs) > 0 {
		line("webhooks", hookLines(c.hookSpecs))
	}
	if tlsOn {
		line("tls", "on ("+c.tlsCert+")")
	} else {
		line("tls", "off (plain http; --tls-cert and --tls-key turn it on)")
	}
	if c.replicate != "" {
		line("replication", fmt.Sprintf("to %s every %s", c.replicateShown, shortDuration(c.replInterval)))
	} else {
		line("replication", "off")
	}
	if c.token != "" {
		line("token", "required (from "+map[bool]string{true: "--token-file", false: "YELLA_TOKEN"}[c.tokenFile != ""]+")")
	}
	for _, s := range sides {
		fmt.Fprintf(w, "  %s\n", s)
	}
	if c.pg {
		line("nodes", fmt.Sprintf("this server is node %s while its engine runs; other servers and programs on the schema are nodes too "+
			"(yella nodes, /api/nodes, the dashboard's Nodes page)", owner))
	}
	if !c.readOnly && !c.pg {
		line("lock", fmt.Sprintf("%s, held by this process (%d): no other engine opens the database until it stops; "+
			"serve --read-only looks beside it", lockPath(c.db), os.Getpid()))
		line("record", recordPath(c.db)+" (for the yella CLI)")
	}
}

// localAddr is the address at which this machine reaches a listener: the
// loopback address when it binds every interface.
func localAddr(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ta.IP == nil || ta.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	return ta.String()
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// lastErr is the replication error to show: the last one while failing.
func lastErr(s replicate.Status) string {
	if s.ConsecutiveErrors == 0 {
		return ""
	}
	return s.LastError
}
