package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
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
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/internal/httpguard"
	"github.com/yella-go/yella/prommetrics"
	"github.com/yella-go/yella/replicate"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

const defaultAddr = "127.0.0.1:3400"

// defaultRetention is serve's retention on its own database.
const defaultRetention = 72 * time.Hour

type serveConfig struct {
	db, addr, metricsAddr, pprofAddr string
	tokenFile, token                 string
	hosts                            string
	demo                             optBool
	demoRate                         float64
	concurrency                      int
	sync                             string
	retention, grace                 time.Duration
	logLevel                         string
	replicate, replicateShown        string
	replInterval                     time.Duration
	readOnly                         bool
	tlsCert, tlsKey                  string
	fs                               *flagSet
}

// optBool is a boolean flag that knows whether it was given.
type optBool struct{ set, val bool }

// String implements flag.Value.
func (b *optBool) String() string {
	if b == nil || !b.set {
		return ""
	}
	return strconv.FormatBool(b.val)
}

// Set implements flag.Value.
func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	b.set, b.val = true, v
	return nil
}

// IsBoolFlag makes "--demo" alone mean true.
func (b *optBool) IsBoolFlag() bool { return true }

func serveFlags(stdout io.Writer) *serveConfig {
	c := &serveConfig{}
	fs := newFlags("serve", stdout)
	c.fs = fs
	fs.StringVar(&c.db, "db", envOr("YELLA_DB", "yella.db"), "the SQLite database `FILE`, created if missing (env YELLA_DB)")
	fs.StringVar(&c.addr, "addr", envOr("YELLA_ADDR", defaultAddr), "listen on `HOST:PORT` for the dashboard, the API and /metrics (env YELLA_ADDR); beyond loopback a token is required")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "also serve /metrics on `HOST:PORT`, without a token, for a scraper; its Host header must be an address of this machine or an --allow-host name")
	fs.StringVar(&c.pprofAddr, "pprof-addr", "", "serve Go's pprof on `HOST:PORT`, a loopback address (off by default)")
	fs.StringVar(&c.tokenFile, "token-file", "", "read the access token from this `FILE` (default: env YELLA_TOKEN; never a flag's value)")
	fs.StringVar(&c.hosts, "allow-host", "", "also accept the Host header `NAMES`, comma-separated (loopback names always are; with a token and a non-loopback --addr, any host is)")
	fs.Var(&c.demo, "demo", "run the built-in demo automations even on a database that holds other processes' runs; --demo=false: never (default: only on a database created for them)")
	fs.Float64Var(&c.demoRate, "demo-rate", 0.5, "`RATE` of demo events per second")
	fs.IntVar(&c.concurrency, "concurrency", 50, "fleet concurrency: `N` handlers executing at once")
	fs.StringVar(&c.sync, "sync", "normal", "durability `MODE`: normal (survives a process crash) or full (also power loss)")
	fs.DurationVar(&c.retention, "retention", defaultRetention, "delete completed runs `DURATION` after they complete, anywhere (0 keeps them); without the flag, 72h on serve's own database only")
	fs.DurationVar(&c.grace, "grace", 30*time.Second, "on SIGINT/SIGTERM, running handlers have `DURATION` to finish before they are handed back")
	fs.StringVar(&c.logLevel, "log-level", "info", "log `LEVEL`: debug, info, warn or error")
	fs.StringVar(&c.replicate, "replicate", os.Getenv("YELLA_REPLICATE"), "replicate the database continuously to `URL`: file:///path or s3://bucket/path?endpoint=…&region=… (env YELLA_REPLICATE; S3 credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)")
	fs.DurationVar(&c.replInterval, "replicate-interval", replicate.DefaultSyncInterval, "ship new commits to the replica every `DURATION`: the window a restore can lose")
	fs.BoolVar(&c.readOnly, "read-only", false, "look only: open the database read-only (even while another process holds it), start no engine, refuse every change")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "serve HTTPS with the PEM certificate (chain) in `FILE`, with --tls-key")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the PEM private key `FILE` of --tls-cert")
	return c
}

// validate checks the flags together; it reads the token.
func (c *serveConfig) validate() error {
	var err error
	if c.token, err = loadToken(c.tokenFile); err != nil {
		return err
	}
	if c.token != "" && len(c.token) < 16 {
		return usagef("the access token must be at least 16 characters")
	}
	if !httpguard.IsLoopback(c.addr) && c.token == "" {
		return usagef("listening on %s (beyond loopback) requires a token: set YELLA_TOKEN or --token-file", c.addr)
	}
	if c.pprofAddr != "" && !httpguard.IsLoopback(c.pprofAddr) {
		return usagef("--pprof-addr must be a loopback address, got %s", c.pprofAddr)
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together: give both or neither")
	}
	if c.demoRate <= 0 || c.demoRate > 1000 {
		return usagef("--demo-rate must be in (0, 1000], got %g", c.demoRate)
	}
	if c.concurrency < 1 {
		return usagef("--concurrency must be at least 1, got %d", c.concurrency)
	}
	if s := strings.ToLower(c.sync); s != "normal" && s != "full" {
		return usagef("--sync must be normal or full, got %q", c.sync)
	}
	if c.replInterval < 10*time.Millisecond {
		return usagef("--replicate-interval must be at least 10ms, got %v", c.replInterval)
	}
	if c.retention < 0 {
		return usagef("--retention must not be negative, got %v", c.retention)
	}
	if c.readOnly {
		for _, f := range []string{"demo", "retention", "replicate"} {
			if flagGiven(c.fs.FlagSet, f) {
				return usagef("--%s changes the database; it does not go with --read-only", f)
			}
		}
		c.replicate = "" // from the environment: nothing to replicate when nothing is written
	}
	return nil
}

func (c *serveConfig) guardOptions() httpguard.Options {
	o := httpguard.Options{Token: c.token}
	o.Hosts = append(o.Hosts, splitNames(c.hosts)...)
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

// sideHosts is the Host allowlist of a listener without a token (the
// metrics listener): the loopback names, the --allow-host names, and the
// addresses it is reachable at: its own host, or every address of this
// machine when it binds them all. An IP address cannot be rebound by DNS.
func (c *serveConfig) sideHosts(addr string) []string {
	hosts := append([]string{"localhost", "127.0.0.1", "::1"}, splitNames(c.hosts)...)
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return hosts
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return append(hosts, host)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				hosts = append(hosts, n.IP.String())
			}
		}
	}
	return hosts
}

// dbFacts is what serve found in the database before choosing the demo and
// the retention.
type dbFacts struct {
	created bool     // serve created the file now (or it was empty)
	runs    int64    // runs it holds
	foreign int64    // runs of processes the demo does not have
	names   []string // some of those processes
}

// own reports whether the database is serve's own: created for it, or
// holding only the demo's runs.
func (f dbFacts) own() bool { return f.created || f.foreign == 0 }

// demoDecision says whether the demo runs, and why.
func demoDecision(c *serveConfig, f dbFacts) (bool, string) {
	rate := fmt.Sprintf("on, %g events/s", c.demoRate)
	switch {
	case c.readOnly:
		return false, "off (read-only)"
	case c.demo.set && !c.demo.val:
		return false, "off (--demo=false)"
	case c.demo.set && f.foreign > 0:
		return true, rate + " (--demo), beside " + plural(int(f.foreign), "run", "runs") + " of other processes: it does not execute them, " +
			"but hands back (to idle) those left running by a process that is gone"
	case c.demo.set:
		return true, rate + " (--demo)"
	case f.created:
		return true, rate + ": a database created for it (--demo=false turns it off)"
	case f.foreign == 0:
		return true, rate + ": the database holds only the demo's runs (--demo=false turns it off)"
	}
	return false, fmt.Sprintf("off: the database holds %s of processes the demo does not have%s; --demo runs it there anyway",
		plural(int(f.foreign), "run", "runs"), nameList(f.names))
}

func nameList(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ", …)"
}

// retentionDecision is the retention serve applies, and why.
func retentionDecision(c *serveConfig, f dbFacts) (time.Duration, string) {
	switch {
	case c.readOnly:
		return 0, "off (read-only)"
	case flagGiven(c.fs.FlagSet, "retention") && c.retention == 0:
		return 0, "off (--retention 0): completed runs are kept"
	case flagGiven(c.fs.FlagSet, "retention"):
		return c.retention, fmt.Sprintf("completed runs are deleted %s after they complete (--retention)", shortDuration(c.retention))
	case f.own():
		return defaultRetention, fmt.Sprintf("completed runs are deleted %s after they complete: serve's own database (--retention 0 keeps them)", shortDuration(defaultRetention))
	}
	return 0, "off: the database holds other processes' runs, so completed runs are kept; --retention DURATION prunes them anyway"
}

// inspect counts the runs of st and those of processes the demo does not
// have, through the store contract.
func inspect(ctx context.Context, st store.Store, created bool) (dbFacts, error) {
	f := dbFacts{created: created}
	var err error
	if f.runs, err = st.CountRuns(ctx, store.RunFilter{}); err != nil {
		return f, err
	}
	demo := demoProcessNames()
	f.foreign = f.runs
	for _, p := range demo {
		n, err := st.CountRuns(ctx, store.RunFilter{Process: p})
		if err != nil {
			return f, err
		}
		f.foreign -= n
	}
	if f.foreign == 0 {
		return f, nil
	}
	sample, err := st.Runs(ctx, store.RunFilter{Order: store.NewestFirst, Limit: 1000})
	if err != nil {
		return f, err
	}
	seen := map[string]bool{}
	for _, p := range demo {
		seen[p] = true
	}
	for _, r := range sample {
		if !seen[r.Process] && len(f.names) < 5 {
			seen[r.Process] = true
			f.names = append(f.names, r.Process)
		}
	}
	return f, nil
}

// openStore opens the database for serve: read-only, or read-write with
// the engine lock (reporting whether the file was created now).
func (c *serveConfig) openStore(log *slog.Logger) (st store.Store, stats func() sqlitestore.Stats, created bool, err error) {
	if c.readOnly {
		ro, err := sqlitestore.OpenReadOnly(c.db, sqlitestore.Options{Logger: log})
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, false, fmt.Errorf("no database at %s (--read-only never creates one)", c.db)
		}
		if err != nil {
			return nil, nil, false, err
		}
		return ro, ro.Stats, false, nil
	}
	if fi, err := os.Stat(c.db); err != nil || fi.Size() == 0 {
		created = true
	}
	sopts := sqlitestore.Options{Synchronous: sqlitestore.Synchronous(c.sync), Logger: log}
	if c.replicate != "" {
		sopts.AutoCheckpoint = replicate.AutoCheckpoint // Litestream checkpoints once it has copied the WAL
	}
	rw, err := sqlitestore.Open(c.db, sopts)
	if errors.Is(err, sqlitestore.ErrLocked) {
		holder := "another process"
		if pid := lockHolder(c.db); pid > 0 {
			holder = fmt.Sprintf("process %d", pid)
		}
		return nil, nil, false, fmt.Errorf("%s is in use by %s, whose engine holds it (%s); yella serve --read-only looks at it without running anything",
			c.db, holder, lockPath(c.db))
	}
	if err != nil {
		return nil, nil, false, err
	}
	return rw, rw.Stats, created, nil
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
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	var cert *tls.Certificate
	if c.tlsCert != "" {
		kp, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cert = &kp
	}
	var target replicate.Target
	if c.replicate != "" {
		if target, err = replicate.ParseURL(c.replicate); err != nil {
			return usagef("--replicate: %v", err)
		}
		c.replicateShown = fmt.Sprint(target)
	}

	st, stats, created, err := c.openStore(log)
	if err != nil {
		return err
	}
	defer st.Close()
	facts := dbFacts{created: created}
	if c.readOnly {
		counts, err := st.Counts(ctx)
		if err != nil {
			return err
		}
		for _, n := range counts {
			facts.runs += n
		}
	} else if facts, err = inspect(ctx, st, created); err != nil {
		return fmt.Errorf("inspect %s: %w", c.db, err)
	}
	demoOn, demoWhy := demoDecision(c, facts)
	retention, retentionWhy := retentionDecision(c, facts)

	var rep *replicate.Replicator
	if c.replicate != "" {
		if rep, err = replicate.Start(ctx, c.db, target, replicate.Options{SyncInterval: c.replInterval, Logger: log}); err != nil {
			return fmt.Errorf("replication: %w", err)
		}
		// Stop the engine and close the store first (below), then the
		// replicator: its final sync then copies every commit.
		defer rep.Close(context.Background())
	}
	eng, err := yella.New(yella.Config{Store: st, Concurrency: c.concurrency, Retention: retention, Logger: log})
	if err != nil {
		return err
	}
	if demoOn {
		if err := registerDemo(eng); err != nil {
			return err
		}
	}
	aopts := httpapi.Options{Version: versionString(), Logger: log}
	popts := prommetrics.Options{
		Writer: func() prommetrics.WriterStats {
			s := stats()
			return prommetrics.WriterStats{Commits: s.Batches, Commands: s.Commands, Busy: time.Duration(s.CommitNanos)}
		},
		Gatherers: []prometheus.Gatherer{prometheus.DefaultGatherer},
	}
	dopts := dashboard.Options{Logger: log}
	if rep != nil {
		aopts.Replication = func() (time.Time, time.Duration, string) {
			s := rep.Status()
			return s.LastSync, s.Lag, lastErr(s)
		}
		popts.Replication = func() (time.Time, time.Duration) { s := rep.Status(); return s.LastSync, s.Lag }
		dopts.ReplicationStatus = func() (time.Time, time.Duration, string, bool) {
			s := rep.Status()
			return s.LastSync, s.Lag, lastErr(s), s.ConsecutiveErrors == 0 && !s.LastSync.IsZero()
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
	guard, err := httpguard.New(c.guardOptions())
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", api)
	mux.Handle("GET /metrics", prom.Handler())
	mux.Handle("/", dash)
	var inner http.Handler = mux
	if c.readOnly {
		inner = refuseMutations(mux, "this server is read-only (yella serve --read-only): it changes nothing; act through the server that runs the database's engine")
	}
	handler := guard.Handler(inner)
	secret := ""
	if !c.readOnly {
		secret = newSecret()
		guarded := handler
		identity := identityHandler(secret)
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == identityPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
				identity.ServeHTTP(w, r) // outside the token check: it reveals nothing
				return
			}
			guarded.ServeHTTP(w, r)
		})
	}

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	scheme := "http"
	if cert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
		scheme = "https"
	}
	servers, sideLines, err := c.sideListeners(prom.Handler())
	if err != nil {
		ln.Close()
		return err
	}
	shutdownSides := func(ctx context.Context) {
		for _, s := range servers {
			s.Shutdown(ctx)
		}
	}
	defer shutdownSides(context.Background())

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// The engine runs only when it has processes to run (the demo's): a
	// started engine without them would only reclaim other programs'
	// abandoned runs and prune their observability data.
	if demoOn {
		if err := eng.Start(ctx); err != nil {
			ln.Close()
			return err
		}
	}
	defer func() { // on an early return; the normal path stops it below
		gctx, cancel := context.WithTimeout(context.Background(), c.grace)
		eng.Stop(gctx)
		cancel()
	}()
	base := scheme + "://" + ln.Addr().String()
	if !c.readOnly {
		rec := serverRecord{PID: os.Getpid(), URL: scheme + "://" + localAddr(ln.Addr()), Secret: secret, DB: absPath(c.db), Started: time.Now().UTC()}
		if cert != nil {
			sum := sha256.Sum256(cert.Certificate[0])
			rec.CertSHA256 = hex.EncodeToString(sum[:])
		}
		if err := writeRecord(c.db, rec); err != nil {
			ln.Close()
			return err
		}
		defer removeRecord(c.db, secret)
	}
	demoCtx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	if demoOn {
		go runDemo(demoCtx, eng, c.demoRate)
	}
	serveErr := make(chan error, 1)
	go func() {
		if cert != nil {
			serveErr <- srv.ServeTLS(ln, "", "")
			return
		}
		serveErr <- srv.Serve(ln)
	}()
	c.summary(stdout, base, facts, demoOn, demoWhy, retentionWhy, cert != nil, sideLines)

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
		removeRecord(c.db, secret)
		os.Exit(130)
	}()
	stopDemo()
	api.Close() // ends the SSE streams so Shutdown does not wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	srv.Shutdown(sctx)
	shutdownSides(sctx)
	cancel()
	gctx, cancel := context.WithTimeout(context.Background(), c.grace)
	defer cancel()
	if err := eng.Stop(gctx); err != nil && yella.CodeOf(err) != yella.CodeGracefulStopTimeout {
		return err
	}
	removeRecord(c.db, secret) // while the lock is still held
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
func (c *serveConfig) summary(out io.Writer, base string, f dbFacts, engineOn bool, demoWhy, retentionWhy string, tlsOn bool, sides []string) {
	w := &strings.Builder{}
	defer func() { io.WriteString(out, w.String()) }()
	defer fmt.Fprintf(w, "yella %s serving %s on %s (dashboard, /api/, /metrics)\n", versionString(), c.db, base)
	state := "existing, " + plural(int(f.runs), "run", "runs")
	if f.created {
		state = "created now"
	}
	line := func(k, v string) { fmt.Fprintf(w, "  %-12s %s\n", k, v) }
	line("database", absPath(c.db)+" ("+state+")")
	switch {
	case c.readOnly:
		line("engine", "none (--read-only): nothing is claimed, reclaimed, pruned or changed; mutations are refused")
	case !engineOn:
		line("engine", "not started: no processes to run here (the demo is off), so nothing is claimed, reclaimed or pruned; "+
			"actions (retry, cancel, requeue) change the database directly and the runs wait for the engine that has their processes")
	default:
		line("engine", fmt.Sprintf("running the demo's processes, concurrency %d, sync %s, grace %s; runs of other processes are not executed",
			c.concurrency, c.sync, shortDuration(c.grace)))
	}
	line("demo", demoWhy)
	line("retention", retentionWhy)
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
	if !c.readOnly {
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
