package main

import (
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/httpguard"
	"github.com/yella-go/yella/replicate"
)

const defaultAddr = "127.0.0.1:3400"

// defaultRetention is serve's retention on its own database.
const defaultRetention = 72 * time.Hour

// serveConfig is the flags of "yella serve".
type serveConfig struct {
	db, addr, metricsAddr, pprofAddr string
	schema                           string // --schema, with a PostgreSQL --db
	pg                               bool   // --db is a PostgreSQL URL
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
	queryTimeout                     time.Duration
	maxResponse, heavyReads, streams int
	sessionIdle, sessionMaxAge       time.Duration
	hooks                            hookFlags  // --hook, as given
	hookFile                         string     // --hook-file
	hookSpecs                        []hookSpec // --hook, parsed by validate
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
	fs.StringVar(&c.db, "db", envOr("YELLA_DB", "yella.db"), "the SQLite database `FILE`, created if missing, or a PostgreSQL URL postgres://USER@HOST:PORT/DATABASE that several servers share (env YELLA_DB)")
	fs.StringVar(&c.schema, "schema", "", "with a PostgreSQL --db: the `NAME` of the schema that holds Yella's tables, created if missing (default "+defaultSchema+"; the URL's schema= parameter also names it)")
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
	fs.DurationVar(&c.queryTimeout, "query-timeout", httpapi.DefaultQueryTimeout, "the longest one API read may take (`DURATION`); its store query is stopped then")
	fs.IntVar(&c.maxResponse, "max-response-bytes", httpapi.DefaultMaxResponseBytes, "the largest API answer in `BYTES`; a read that would answer more fails (ask for fewer runs)")
	fs.IntVar(&c.heavyReads, "max-heavy-reads", httpapi.DefaultMaxHeavyReads, "`N` API reads of runs served at once; more are answered 503 with Retry-After")
	fs.IntVar(&c.streams, "max-event-streams", httpapi.DefaultMaxSubscribers, "`N` event streams (SSE) served at once; more are answered 503")
	fs.DurationVar(&c.sessionIdle, "session-idle", httpguard.DefaultSessionIdle, "a browser signed in with the token is signed out after `DURATION` without a request")
	fs.DurationVar(&c.sessionMaxAge, "session-max-age", httpguard.DefaultSessionMaxAge, "a browser is signed out `DURATION` after signing in, however active")
	fs.Var(&c.hooks, "hook", hookUsage)
	fs.StringVar(&c.hookFile, "hook-file", "", hookFileUsage)
	return c
}

// validate checks the flags together; it reads the token.
func (c *serveConfig) validate() error {
	var err error
	if c.token, err = loadToken(c.tokenFile); err != nil {
		return err
	}
	if c.token != "" {
		if err := httpguard.CheckToken(c.token); err != nil {
			src := "YELLA_TOKEN"
			if c.tokenFile != "" {
				src = "--token-file " + c.tokenFile
			}
			return usagef("%s: %v", src, err)
		}
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
	if err := c.validateDB(); err != nil {
		return err
	}
	if c.readOnly {
		for _, f := range []string{"demo", "retention", "replicate", "hook", "hook-file"} {
			if flagGiven(c.fs.FlagSet, f) {
				return usagef("--%s changes the database; it does not go with --read-only", f)
			}
		}
		c.replicate = "" // from the environment: nothing to replicate when nothing is written
	}
	if c.hookSpecs, err = parseHooks(c.hooks, c.hookFile, os.Getenv); err != nil {
		return err
	}
	return nil
}

// validateDB checks the flags that depend on the kind of database: the
// SQLite ones are refused with PostgreSQL, naming the flag, and --schema
// without it.
func (c *serveConfig) validateDB() error {
	c.pg = isPostgres(c.db)
	if !c.pg {
		if flagGiven(c.fs.FlagSet, "schema") {
			return usagef("--schema goes with a PostgreSQL --db (postgres://…); a SQLite file has no schemas")
		}
		return nil
	}
	for _, f := range []struct{ name, why string }{
		{"sync", "PostgreSQL's own synchronous_commit decides durability"},
		{"replicate", "replicate the PostgreSQL server with its own tools (streaming replication, backups)"},
		{"replicate-interval", "it goes with --replicate"},
		{"read-only", "several servers share a PostgreSQL database, so nothing needs to look beside a locked file; a server whose demo is off runs nothing (or connect with a read-only role)"},
	} {
		if flagGiven(c.fs.FlagSet, f.name) {
			return usagef("--%s is for a SQLite --db, not PostgreSQL: %s", f.name, f.why)
		}
	}
	if c.replicate != "" {
		return usagef("YELLA_REPLICATE is set, but replication (--replicate) is for a SQLite --db, not PostgreSQL: unset it")
	}
	_, schema, err := pgTarget(c.db, c.schema)
	c.schema = schema
	return err
}

func (c *serveConfig) guardOptions() httpguard.Options {
	o := httpguard.Options{Token: c.token, SessionIdle: c.sessionIdle, SessionMaxAge: c.sessionMaxAge}
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
