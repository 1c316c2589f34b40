package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/internal/httpguard"
	"github.com/yella-go/yella/prommetrics"
	"github.com/yella-go/yella/replicate"
	"github.com/yella-go/yella/store/sqlitestore"
)

const defaultAddr = "127.0.0.1:3400"

type serveConfig struct {
	db, addr, metricsAddr, pprofAddr string
	token, tokenFile                 string
	hosts                            string
	demo                             bool
	demoRate                         float64
	concurrency                      int
	sync                             string
	retention, grace                 time.Duration
	logLevel                         string
	replicate                        string
	replInterval                     time.Duration
	queryTimeout                     time.Duration
	maxResponse, heavyReads, streams int
	sessionIdle, sessionMaxAge       time.Duration
}

func serveFlags(stderr io.Writer) (*serveConfig, *flag.FlagSet) {
	c := &serveConfig{}
	fs := newFlags("serve", stderr)
	fs.StringVar(&c.db, "db", envOr("YELLA_DB", "yella.db"), "the SQLite database file, created if missing (env YELLA_DB)")
	fs.StringVar(&c.addr, "addr", envOr("YELLA_ADDR", defaultAddr), "where the dashboard, the API and /metrics listen (env YELLA_ADDR); beyond loopback a token is required")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "also serve /metrics on this separate listener, without a token (for a scraper on a private network)")
	fs.StringVar(&c.pprofAddr, "pprof-addr", "", "serve Go's pprof on this separate listener (loopback only; off by default)")
	fs.StringVar(&c.token, "token", "", "the access token (prefer env YELLA_TOKEN or --token-file: flags show in ps)")
	fs.StringVar(&c.tokenFile, "token-file", "", "read the access token from this file")
	fs.StringVar(&c.hosts, "allow-host", "", "extra Host names accepted, comma-separated (loopback names always are; with a token and a non-loopback address, any host is)")
	fs.BoolVar(&c.demo, "demo", true, "run the built-in demo automations (--demo=false for none)")
	fs.Float64Var(&c.demoRate, "demo-rate", 0.5, "demo events per second")
	fs.IntVar(&c.concurrency, "concurrency", 50, "fleet concurrency: handlers executing at once")
	fs.StringVar(&c.sync, "sync", "normal", "durability: normal (survives a process crash) or full (also power loss)")
	fs.DurationVar(&c.retention, "retention", 72*time.Hour, "delete completed runs this long after they complete (0 keeps everything)")
	fs.DurationVar(&c.grace, "grace", 30*time.Second, "on SIGINT/SIGTERM, how long running handlers may finish before they are handed back")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.replicate, "replicate", os.Getenv("YELLA_REPLICATE"), "replicate the database continuously to file:///path or s3://bucket/path?endpoint=…&region=… (env YELLA_REPLICATE; S3 credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)")
	fs.DurationVar(&c.replInterval, "replicate-interval", replicate.DefaultSyncInterval, "how often new commits are shipped to the replica: the window a restore can lose")
	fs.DurationVar(&c.queryTimeout, "query-timeout", httpapi.DefaultQueryTimeout, "the longest one API read may take; its store query is stopped then")
	fs.IntVar(&c.maxResponse, "max-response-bytes", httpapi.DefaultMaxResponseBytes, "the largest API answer; a read that would answer more fails (ask for fewer runs)")
	fs.IntVar(&c.heavyReads, "max-heavy-reads", httpapi.DefaultMaxHeavyReads, "API reads of runs served at once; more are answered 503 with Retry-After")
	fs.IntVar(&c.streams, "max-event-streams", httpapi.DefaultMaxSubscribers, "event streams (SSE) served at once; more are answered 503")
	fs.DurationVar(&c.sessionIdle, "session-idle", httpguard.DefaultSessionIdle, "a browser signed in with the token is signed out after this long without a request")
	fs.DurationVar(&c.sessionMaxAge, "session-max-age", httpguard.DefaultSessionMaxAge, "a browser is signed out this long after signing in, however active")
	return c, fs
}

func (c *serveConfig) resolveToken() error {
	if c.token != "" && c.tokenFile != "" {
		return usagef("give --token or --token-file, not both")
	}
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return fmt.Errorf("token file: %w", err)
		}
		c.token = strings.TrimSpace(string(b))
		if c.token == "" {
			return fmt.Errorf("token file %s is empty", c.tokenFile)
		}
	}
	if c.token == "" {
		c.token = os.Getenv("YELLA_TOKEN")
	}
	if c.token != "" && len(c.token) < 16 {
		return usagef("the access token must be at least 16 characters")
	}
	if !httpguard.IsLoopback(c.addr) && c.token == "" {
		return usagef("listening on %s (beyond loopback) requires a token: set YELLA_TOKEN, --token-file or --token", c.addr)
	}
	if c.pprofAddr != "" && !httpguard.IsLoopback(c.pprofAddr) {
		return usagef("--pprof-addr must be a loopback address, got %s", c.pprofAddr)
	}
	return nil
}

func (c *serveConfig) guardOptions() httpguard.Options {
	o := httpguard.Options{Token: c.token, SessionIdle: c.sessionIdle, SessionMaxAge: c.sessionMaxAge}
	for _, h := range strings.Split(c.hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			o.Hosts = append(o.Hosts, h)
		}
	}
	if len(o.Hosts) > 0 || !httpguard.IsLoopback(c.addr) {
		o.Hosts = append(o.Hosts, "localhost", "127.0.0.1", "::1")
		if host, _, err := net.SplitHostPort(c.addr); err == nil && host != "" {
			o.Hosts = append(o.Hosts, host)
		}
		if c.token != "" && c.hosts == "" {
			o.Hosts = []string{"*"} // a token protects against DNS rebinding: the attacker has no token
		}
	}
	return o
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, fs := serveFlags(stderr)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("serve takes no arguments, got %q", strings.Join(pos, " "))
	}
	if err := c.resolveToken(); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return usagef("invalid --log-level %q", c.logLevel)
	}
	if c.demoRate <= 0 || c.demoRate > 1000 {
		return usagef("--demo-rate must be in (0, 1000], got %g", c.demoRate)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	var target replicate.Target
	sopts := sqlitestore.Options{Synchronous: sqlitestore.Synchronous(c.sync), Logger: log}
	if c.replicate != "" {
		if target, err = replicate.ParseURL(c.replicate); err != nil {
			return usagef("--replicate: %v", err)
		}
		sopts.AutoCheckpoint = replicate.AutoCheckpoint // Litestream checkpoints once it has copied the WAL
	}
	st, err := sqlitestore.Open(c.db, sopts)
	if errors.Is(err, sqlitestore.ErrLocked) {
		return fmt.Errorf("%s is in use by another engine process (is a yella serve already running?)", c.db)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	var rep *replicate.Replicator
	if c.replicate != "" {
		if rep, err = replicate.Start(ctx, c.db, target, replicate.Options{SyncInterval: c.replInterval, Logger: log}); err != nil {
			return fmt.Errorf("replication: %w", err)
		}
		// Stop the engine and close the store first (below), then the
		// replicator: its final sync then copies every commit.
		defer rep.Close(context.Background())
	}
	eng, err := yella.New(yella.Config{Store: st, Concurrency: c.concurrency, Retention: c.retention, Logger: log})
	if err != nil {
		return err
	}
	if c.demo {
		if err := registerDemo(eng, nil); err != nil {
			return err
		}
	}
	aopts := httpapi.Options{Version: versionString(), Logger: log, QueryTimeout: c.queryTimeout, MaxResponseBytes: c.maxResponse,
		MaxHeavyReads: c.heavyReads, MaxSubscribers: c.streams}
	popts := prommetrics.Options{
		Writer: func() prommetrics.WriterStats {
			s := st.Stats()
			return prommetrics.WriterStats{Commits: s.Batches, Commands: s.Commands, Busy: time.Duration(s.CommitNanos)}
		},
		Gatherers: []prometheus.Gatherer{prometheus.DefaultGatherer},
	}
	dopts := dashboard.Options{Logger: log}
	if rep != nil {
		aopts.Replication = func() httpapi.ReplicationState {
			s := rep.Status()
			return httpapi.ReplicationState{LastSync: s.LastSync, Lag: s.Lag, LastError: lastErr(s), Stalled: s.Stalled}
		}
		popts.Replication = func() prommetrics.ReplicationState {
			s := rep.Status()
			return prommetrics.ReplicationState{LastSync: s.LastSync, Lag: s.Lag, Stalled: s.Stalled != ""}
		}
		dopts.ReplicationStatus = func() dashboard.ReplicationState {
			s := rep.Status()
			return dashboard.ReplicationState{LastSync: s.LastSync, Lag: s.Lag, LastError: lastErr(s),
				OK: s.ConsecutiveErrors == 0 && !s.LastSync.IsZero(), Stalled: s.Stalled}
		}
	}
	api := httpapi.New(eng, aopts)
	defer api.Close()
	prom := prommetrics.New(eng, popts)
	defer prom.Close()
	dash, err := dashboard.New(eng, dopts)
	if err != nil {
		return err
	}
	gopts := c.guardOptions()
	gopts.Logger = log
	guard, err := httpguard.New(gopts)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", api)
	mux.Handle("GET /metrics", prom.Handler())
	mux.Handle("/", dash)

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: guard.Handler(mux), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	extra := map[string]http.Handler{}
	if c.metricsAddr != "" {
		extra[c.metricsAddr] = prom.Handler()
	}
	if c.pprofAddr != "" {
		pm := http.NewServeMux()
		pm.HandleFunc("/debug/pprof/", pprof.Index)
		pm.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		pm.HandleFunc("/debug/pprof/profile", pprof.Profile)
		pm.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		pm.HandleFunc("/debug/pprof/trace", pprof.Trace)
		extra[c.pprofAddr] = pm
	}
	var servers []*http.Server
	for addr, h := range extra {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("listen %s: %w", addr, err)
		}
		s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 2 * time.Minute}
		servers = append(servers, s)
		go s.Serve(l)
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := eng.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	defer func() { // on an early return; the normal path stops it below
		gctx, cancel := context.WithTimeout(context.Background(), c.grace)
		eng.Stop(gctx)
		cancel()
	}()
	demoCtx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	if c.demo {
		go runDemo(demoCtx, eng, c.demoRate)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "yella %s serving %s on http://%s (dashboard, /api/, /metrics)\n", versionString(), c.db, ln.Addr())

	select {
	case sig := <-sigs:
		log.Info("shutting down: stopping admissions, finishing running handlers", "signal", sig.String(), "grace", c.grace)
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	// A second signal forces the exit: everything committed is durable,
	// and the next start resumes the rest.
	go func() {
		sig := <-sigs
		log.Warn("second signal: exiting now; unfinished runs resume at the next start", "signal", sig.String())
		os.Exit(130)
	}()
	stopDemo()
	api.Close() // ends the SSE streams so Shutdown does not wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	srv.Shutdown(sctx)
	for _, s := range servers {
		s.Shutdown(sctx)
	}
	cancel()
	gctx, cancel := context.WithTimeout(context.Background(), c.grace)
	defer cancel()
	if err := eng.Stop(gctx); err != nil && yella.CodeOf(err) != yella.CodeGracefulStopTimeout {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	if rep != nil {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rep.Close(rctx); err != nil {
			return fmt.Errorf("replication: the last commits may not be on the replica: %w", err)
		}
	}
	fmt.Fprintln(stdout, "yella stopped")
	return nil
}

// lastErr is the replication error to show: the last one while failing.
func lastErr(s replicate.Status) string {
	if s.ConsecutiveErrors == 0 {
		return ""
	}
	return s.LastError
}
