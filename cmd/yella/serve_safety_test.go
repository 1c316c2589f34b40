package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

// TestDemoAndRetentionDecisions: the demo and the default retention apply
// only to serve's own database (created now, or holding only the demo's
// runs); explicit flags apply anywhere; read-only has neither.
func TestDemoAndRetentionDecisions(t *testing.T) {
	foreign := dbFacts{runs: 12, foreign: 10, names: []string{"order-charge"}}
	cases := []struct {
		name      string
		args      []string
		facts     dbFacts
		demo      bool
		retention time.Duration
		why       string
	}{
		{"new file", nil, dbFacts{created: true}, true, defaultRetention, "a database created for it"},
		{"only the demo's runs", nil, dbFacts{runs: 40}, true, defaultRetention, "holds only the demo's runs"},
		{"another program's runs", nil, foreign, false, 0, "10 runs of processes the demo does not have (order-charge, …)"},
		{"--demo on another program's runs", []string{"--demo"}, foreign, true, 0, "(--demo), beside 10 runs of other processes"},
		{"--demo=false on a new file", []string{"--demo=false"}, dbFacts{created: true}, false, defaultRetention, "off (--demo=false)"},
		{"--retention on another program's runs", []string{"--retention", "24h"}, foreign, false, 24 * time.Hour, ""},
		{"--retention 0 on a new file", []string{"--retention", "0"}, dbFacts{created: true}, true, 0, ""},
		{"--read-only", []string{"--read-only"}, foreign, false, 0, "off (read-only)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := serveFlags(io.Discard)
			if _, err := parse(c.fs, tc.args); err != nil {
				t.Fatal(err)
			}
			demo, why := demoDecision(c, tc.facts)
			retention, rwhy := retentionDecision(c, tc.facts)
			if demo != tc.demo || retention != tc.retention || !strings.Contains(why, tc.why) {
				t.Errorf("demo %v (%s), retention %v (%s); want demo %v (…%s…), retention %v", demo, why, retention, rwhy, tc.demo, tc.why, tc.retention)
			}
		})
	}
}

// TestServeFlagErrors: flags that would leak the token, TLS half
// configured and read-only with writes are refused, naming the flags.
func TestServeFlagErrors(t *testing.T) {
	t.Setenv("YELLA_TOKEN", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--token", "sekrit-sekrit-sekrit"}, "--token-file FILE, or set YELLA_TOKEN"},
		{[]string{"-token=sekrit-sekrit-sekrit"}, "--token is not accepted"},
		{[]string{"--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-key", "k.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--read-only", "--demo"}, "--demo changes the database"},
		{[]string{"--read-only", "--retention", "1h"}, "--retention changes the database"},
		{[]string{"--read-only", "--replicate", "file:///tmp/x"}, "--replicate changes the database"},
		{[]string{"--sync", "sometimes"}, "--sync must be normal or full"},
		{[]string{"--replicate-interval", "1ms"}, "--replicate-interval must be at least 10ms"},
		{[]string{"--addr", "0.0.0.0:0"}, "requires a token: set YELLA_TOKEN or --token-file"},
		{[]string{"--db", filepath.Join(t.TempDir(), "none.db"), "--read-only"}, "--read-only never creates one"},
	} {
		err := Run(context.Background(), append([]string{"serve"}, tc.args...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sekrit") {
			t.Errorf("serve %s: %v, want …%s…", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	// A token the guard would refuse is refused up front, naming where it
	// came from and never echoing it.
	spaces := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(spaces, []byte("sekrit sekrit sekrit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ env, file, want string }{
		{"                 ", "", "YELLA_TOKEN: the access token must not contain spaces"},
		{"sekrit", "", "YELLA_TOKEN: the access token must be at least 16 characters"},
		{"", spaces, "--token-file " + spaces + ": the access token must not contain spaces"},
	} {
		t.Setenv("YELLA_TOKEN", tc.env)
		args := []string{"serve", "--db", filepath.Join(t.TempDir(), "x.db")}
		if tc.file != "" {
			args = append(args, "--token-file", tc.file)
		}
		err := Run(context.Background(), args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sekrit ") {
			t.Errorf("token %q/%q: %v, want …%s…", tc.env, tc.file, err, tc.want)
		}
	}
}

// freePort is a loopback address free at the time of the call.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestSideListenersCheckHost: the metrics and pprof listeners are behind
// the same Host allowlist as the main one, so a DNS-rebinding page cannot
// read them (pprof's cmdline holds the command line).
func TestSideListenersCheckHost(t *testing.T) {
	if testing.Short() {
		t.Skip("a real serve process")
	}
	metrics, pprofAddr := freePort(t), freePort(t)
	startServe(t, "--demo=false", "--metrics-addr", metrics, "--pprof-addr", pprofAddr)
	for _, u := range []string{"http://" + metrics + "/metrics", "http://" + pprofAddr + "/debug/pprof/cmdline"} {
		code, _ := getHost(t, u, "")
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", u, code)
		}
		code, body := getHost(t, u, "rebind.attacker.example")
		if code != http.StatusMisdirectedRequest {
			t.Errorf("GET %s with a foreign Host: %d %s", u, code, body)
		}
	}
}

func getHost(t *testing.T, u, host string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "yella test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return cert, key
}

// TestServeTLS: serve --tls-cert/--tls-key serves HTTPS and says so; the
// CLI reaches it through its record (pinning the recorded certificate),
// or with --server https://… and --ca-file; without the CA it refuses.
func TestServeTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("a real serve process")
	}
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	db := filepath.Join(dir, "tls.db")
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("a-token-of-the-operator-0123456789\n"), 0o600)
	srv, base := serveProc(t, []string{"YELLA_TOKEN=a-token-of-the-operator-0123456789"},
		"--db", db, "--addr", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, "--demo-rate", "0.001")
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("serve with TLS: %q\n%s", base, srv.out.text())
	}
	if !strings.Contains(srv.out.text(), "tls          on ("+cert+")") {
		t.Errorf("serve does not say TLS is on:\n%s", srv.out.text())
	}
	if fi, err := os.Stat(recordPath(db)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the server record: %v %v", fi, err)
	}
	run := func(args ...string) (string, error) {
		var out strings.Builder
		err := Run(context.Background(), append(args, "--token-file", token), &out, &out)
		return out.String(), err
	}
	if out, err := run("runs", "list", "--db", db); err != nil || !strings.Contains(out, "of") {
		t.Errorf("runs list --db through the TLS server's record: %v\n%s", err, out)
	}
	if _, err := run("runs", "list", "--server", base); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("--server https without the CA: %v", err)
	}
	if out, err := run("runs", "list", "--server", base, "--ca-file", cert); err != nil || !strings.Contains(out, "of") {
		t.Errorf("--server https with --ca-file: %v\n%s", err, out)
	}
	if err := srv.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve: %v\n%s", err, srv.out.text())
	}
	if _, err := os.Stat(recordPath(db)); err == nil {
		t.Error("the record outlived a clean stop")
	}
}

// fakeServer records what it receives and answers identity challenges
// with a MAC of its own secret.
type fakeServer struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	if r.URL.Path == identityPath {
		identityHandler(newSecret()).ServeHTTP(w, r)
		return
	}
	io.WriteString(w, `{"runs":[],"total":0}`)
}

// TestServerRecordChecked: with the database locked, the CLI goes only to
// the server its record names, and only after that server proves it knows
// the record's secret: an impostor gets one identity challenge and no
// token; a record of another process (stale) or no record is an error that
// names the process holding the database.
func TestServerRecordChecked(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "locked.db")
	st, err := sqlitestore.Open(db, sqlitestore.Options{}) // holds the engine lock, as an application does
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t.Setenv("YELLA_TOKEN", "a-token-of-the-operator-0123456789")
	list := func() error {
		return Run(context.Background(), []string{"runs", "list", "--db", db}, io.Discard, io.Discard)
	}
	pid := os.Getpid()
	if err := list(); err == nil || !strings.Contains(err.Error(), "process "+strconv.Itoa(pid)) || !strings.Contains(err.Error(), "--read-only") {
		t.Errorf("no record: %v", err)
	}
	fake := &fakeServer{}
	hs := httptest.NewServer(fake)
	defer hs.Close()
	writeRecord(db, serverRecord{PID: pid + 1, URL: hs.URL, Secret: newSecret()})
	if err := list(); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("a stale record: %v", err)
	}
	writeRecord(db, serverRecord{PID: pid, URL: hs.URL, Secret: newSecret()})
	if err := list(); err == nil || !strings.Contains(err.Error(), "did not prove") {
		t.Errorf("an impostor: %v", err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.reqs) != 1 || fake.reqs[0].URL.Path != identityPath || fake.reqs[0].Header.Get("Authorization") != "" {
		t.Errorf("the impostor got %d requests (want one identity challenge without a token)", len(fake.reqs))
	}
}

// TestIdentityHandler: the identity route answers HMAC-SHA256(secret,
// challenge) and refuses a malformed challenge.
func TestIdentityHandler(t *testing.T) {
	secret := newSecret()
	hs := httptest.NewServer(identityHandler(secret))
	defer hs.Close()
	if err := proveIdentity(context.Background(), hs.Client(), hs.URL, secret); err != nil {
		t.Fatalf("the right secret: %v", err)
	}
	if err := proveIdentity(context.Background(), hs.Client(), hs.URL, newSecret()); err == nil {
		t.Fatal("another secret passed")
	}
	for _, c := range []string{"", "xyz", strings.Repeat("a", 10), strings.Repeat("a", 200)} {
		resp, err := http.Get(hs.URL + identityPath + "?challenge=" + c)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("challenge %q: %d", c, resp.StatusCode)
		}
	}
}

// TestDemoDefersApprovals: the demo's approvals wait for someone; its
// approver resumes those asked by ops after approveAfter and leaves the
// others (finance's, or without an actor) deferred for "yella resume".
func TestDemoDefersApprovals(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := registerDemo(eng); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	var ops, finance []yella.Run
	for i := range 3 {
		r, err := eng.EmitAndWait(ctx, "approval:needed", map[string]string{"approvalId": "apr_" + strconv.Itoa(i), "actor": "ops"})
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, r...)
		r, err = eng.EmitAndWait(ctx, "approval:needed", map[string]string{"approvalId": "apr_f" + strconv.Itoa(i), "actor": "finance"})
		if err != nil {
			t.Fatal(err)
		}
		finance = append(finance, r...)
	}
	for _, r := range append(ops, finance...) {
		if r.Status != yella.StatusDeferred {
			t.Fatalf("approval %s is %s, want deferred", r.ID, r.Status)
		}
	}
	var a approver
	a.pass(ctx, eng, time.Now()) // too young: nothing is decided
	a.pass(ctx, eng, time.Now().Add(approveAfter+time.Second))
	a.pass(ctx, eng, time.Now().Add(2*approveAfter)) // nothing twice
	for _, r := range ops {
		got, _ := eng.Run(ctx, r.ID)
		if got.Status != yella.StatusCompleted {
			t.Errorf("ops approval %s is %s, want resumed (completed)", r.ID, got.Status)
		}
	}
	for _, r := range finance {
		got, _ := eng.Run(ctx, r.ID)
		if got.Status != yella.StatusDeferred {
			t.Errorf("finance approval %s is %s, want still deferred", r.ID, got.Status)
		}
	}
	page, _ := eng.Runs(ctx, yella.RunQuery{Process: "approval-finish", Limit: 100})
	if len(page.Runs) != len(ops) {
		t.Errorf("%d approval-finish runs, want %d", len(page.Runs), len(ops))
	}
}

// TestHelpGolden: every command's help shows its subcommands and flags.
func TestHelpGolden(t *testing.T) {
	for _, k := range []string{"YELLA_DB", "YELLA_SERVER", "YELLA_ADDR", "YELLA_REPLICATE", "YELLA_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("XDG_CACHE_HOME", "/home/you/.cache")
	var all strings.Builder
	for _, args := range [][]string{
		{"help"}, {"help", "runs"}, {"runs", "-h"}, {"runs", "list", "-h"}, {"runs", "show", "--help"},
		{"serve", "-h"}, {"emit", "-h"}, {"retry", "-h"}, {"cancel", "-h"}, {"requeue", "-h"}, {"resume", "-h"}, {"signal", "-h"}, {"end-wait", "-h"},
		{"restore", "-h"}, {"version", "-h"}, {"bench", "-h"}, {"report", "-h"}, {"limits", "-h"}, {"schedules", "-h"},
	} {
		var out strings.Builder
		err := Run(context.Background(), args, &out, &out)
		if err != nil && err != flag.ErrHelp {
			t.Errorf("yella %s: %v", strings.Join(args, " "), err)
		}
		if !strings.Contains(out.String(), "usage: yella") {
			t.Errorf("yella %s prints no usage line:\n%s", strings.Join(args, " "), out.String())
		}
		if args[0] != "help" && args[0] != "version" && !strings.Contains(out.String(), "--") {
			t.Errorf("yella %s lists no flags:\n%s", strings.Join(args, " "), out.String())
		}
		all.WriteString("$ yella " + strings.Join(args, " ") + "\n" + out.String() + "\n")
	}
	golden(t, "help", all.String())
}
