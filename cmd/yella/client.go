package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/httpguard"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// target says where an operator command acts: the server that holds the
// database (found through its server record and checked), a server named
// with --server, or the database file directly when no process holds it.
type target struct {
	db, schema, server, tokenFile, caFile string
	readOnly, allowHTTP, json             bool
	fs                                    *flagSet
	stderr                                io.Writer
}

func (t *target) flags(fs *flagSet, stderr io.Writer) {
	t.fs, t.stderr = fs, stderr
	fs.StringVar(&t.db, "db", envOr("YELLA_DB", "yella.db"), "the database file (`PATH`, env YELLA_DB): its server when one holds it (see <db>.server), else the file itself; or a PostgreSQL URL postgres://…, opened directly")
	fs.StringVar(&t.schema, "schema", "", "with a PostgreSQL --db: the `NAME` of Yella's schema (default "+defaultSchema+"; or the URL's schema= parameter)")
	fs.StringVar(&t.server, "server", os.Getenv("YELLA_SERVER"), "talk to the server at this `URL` (http:// or https://, env YELLA_SERVER) instead of finding the database's")
	fs.StringVar(&t.tokenFile, "token-file", "", "read the server's access token from this `FILE` (default: env YELLA_TOKEN; never a flag's value)")
	fs.StringVar(&t.caFile, "ca-file", "", "with an https:// --server: trust the CA (or the self-signed certificate) in this PEM `FILE`")
	fs.BoolVar(&t.readOnly, "read-only", false, "open the database file read-only, even while another process holds it: no server, no lock, nothing changed")
	fs.BoolVar(&t.allowHTTP, "allow-http", false, "send the token over plain http:// to a host that is not loopback (anyone on the network path can read it)")
	fs.BoolVar(&t.json, "json", false, "print JSON (the API's shapes) instead of text")
}

// client speaks the JSON API, over the network or in process: both paths
// run the same handlers, so the CLI behaves the same either way.
type client struct {
	base  string
	hc    *http.Client
	token string
	close func()
	where string // for messages: the server URL or the database path
	// eng is the engine of direct mode (nil for a server): it has no
	// processes and is never started, so it runs nothing.
	eng *yella.Engine
}

// connect finds where the command acts (see target).
func (t *target) connect(ctx context.Context) (*client, error) {
	token, err := loadToken(t.tokenFile)
	if err != nil {
		return nil, err
	}
	dbGiven, serverGiven := flagGiven(t.fs.FlagSet, "db"), flagGiven(t.fs.FlagSet, "server")
	switch {
	case dbGiven && serverGiven:
		return nil, usagef("give --db (the server holding it is found) or --server, not both")
	case t.server != "" && (dbGiven || t.readOnly) && !serverGiven:
		// --db or --read-only on the command line wins over YELLA_SERVER.
	case t.server != "" && t.readOnly:
		return nil, usagef("--read-only reads the database file; it does not go with --server")
	case t.server != "":
		return t.remote(t.server, token)
	}
	if t.caFile != "" {
		return nil, usagef("--ca-file goes with an https:// --server")
	}
	if isPostgres(t.db) {
		return t.postgres(ctx)
	}
	if flagGiven(t.fs.FlagSet, "schema") {
		return nil, usagef("--schema goes with a PostgreSQL --db (postgres://…); a SQLite file has no schemas")
	}
	if t.readOnly {
		st, err := sqlitestore.OpenReadOnly(t.db, sqlitestore.Options{})
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s", t.db)
		}
		if err != nil {
			return nil, err
		}
		return direct(st, t.db, true)
	}
	if _, err := os.Stat(t.db); err != nil {
		return nil, fmt.Errorf("no database at %s (give --db PATH, or --server URL for a running server)", t.db)
	}
	st, err := sqlitestore.Open(t.db, sqlitestore.Options{})
	if errors.Is(err, sqlitestore.ErrLocked) {
		return t.recorded(ctx, token)
	}
	if err != nil {
		return nil, err
	}
	return direct(st, t.db, false)
}

// postgres opens a PostgreSQL --db directly: several processes share it,
// so no server holds it and none is looked for. The schema must exist (the
// CLI never creates one); --read-only refuses every change.
func (t *target) postgres(ctx context.Context) (*client, error) {
	st, _, err := openPG(ctx, t.db, t.schema, true, nil)
	if err != nil {
		return nil, err
	}
	return direct(st, redactURL(t.db), t.readOnly)
}

// direct is the API of an engine on st in this process: no processes, never
// started, so it executes nothing; readOnly refuses every mutation.
func direct(st store.Store, db string, readOnly bool) (*client, error) {
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		st.Close()
		return nil, err
	}
	api := httpapi.New(eng, httpapi.Options{Version: versionString()})
	var h http.Handler = api
	if readOnly {
		h = refuseMutations(h, "the database is open read-only (--read-only): nothing is changed")
	}
	return &client{base: "http://local", hc: &http.Client{Transport: inProcess{h}}, where: db, eng: eng,
		close: func() { api.Close(); st.Close() }}, nil
}

// recorded connects to the server recorded for t.db, which some process
// holds locked, after checking its identity; it sends nothing else until
// the check passes.
func (t *target) recorded(ctx context.Context, token string) (*client, error) {
	pid := lockHolder(t.db)
	holder := "another process"
	if pid > 0 {
		holder = fmt.Sprintf("process %d", pid)
	}
	how := "give the URL of that program's server with --server URL, or look at the file without changing it with --read-only"
	rec, err := readRecord(t.db)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s is in use by %s (it holds %s), which recorded no yella server for it (no %s): %s",
			t.db, holder, lockPath(t.db), recordPath(t.db), how)
	}
	if err != nil {
		return nil, fmt.Errorf("%s is in use by %s: %v; %s", t.db, holder, err, how)
	}
	if pid == 0 || rec.PID != pid {
		return nil, fmt.Errorf("%s is in use by %s, but %s names pid %d: a stale record, not that process's server; %s",
			t.db, holder, recordPath(t.db), rec.PID, how)
	}
	hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: noRedirects}
	if strings.HasPrefix(rec.URL, "https://") {
		hc.Transport = &http.Transport{TLSClientConfig: pinnedTLS(rec.CertSHA256), Proxy: nil}
	} else {
		hc.Transport = &http.Transport{Proxy: nil}
	}
	if err := proveIdentity(ctx, hc, rec.URL, rec.Secret); err != nil {
		hc.CloseIdleConnections()
		return nil, fmt.Errorf("the server recorded for %s at %s did not prove that it holds the database (%v); nothing else was sent to it. %s",
			t.db, rec.URL, err, how)
	}
	if err := t.tokenAllowed(rec.URL, token); err != nil {
		return nil, err
	}
	hc.Timeout = 30 * time.Second
	return &client{base: rec.URL, hc: hc, token: token, where: rec.URL + " (the server of " + t.db + ")", close: hc.CloseIdleConnections}, nil
}

// remote is a server named with --server.
func (t *target) remote(raw, token string) (*client, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--server must be an http:// or https:// URL, got %q", raw)
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if t.caFile != "" {
		if u.Scheme != "https" {
			return nil, usagef("--ca-file goes with an https:// --server")
		}
		pem, err := os.ReadFile(t.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", t.caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	base := strings.TrimRight(u.String(), "/")
	if err := t.tokenAllowed(base, token); err != nil {
		return nil, err
	}
	return &client{base: base, hc: &http.Client{Timeout: 30 * time.Second, Transport: tr, CheckRedirect: noRedirects},
		token: token, where: base, close: tr.CloseIdleConnections}, nil
}

// tokenAllowed refuses to send a token over plain http to a host that is
// not loopback unless --allow-http says so, and then warns.
func (t *target) tokenAllowed(base, token string) error {
	u, err := url.Parse(base)
	if err != nil || token == "" || u.Scheme != "http" || httpguard.IsLoopback(u.Hostname()) {
		return nil
	}
	if !t.allowHTTP {
		return usagef("refusing to send the access token over plain http to %s, where anyone on the network path can read it: "+
			"serve with --tls-cert/--tls-key and use https://, or pass --allow-http to send it anyway", u.Host)
	}
	fmt.Fprintf(t.stderr, "yella: warning: sending the access token over plain http to %s (--allow-http)\n", u.Host)
	return nil
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// apiErr is an error answered by the API.
type apiErr struct {
	status        int
	code, message string
}

func (e *apiErr) Error() string { return fmt.Sprintf("%s (%s)", e.message, e.code) }

// tidy drops an operation prefix that the message repeats ("run: run not
// found: x" reads "run not found: x").
func tidy(msg string) string {
	if op, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(rest, op+" ") {
		return rest
	}
	return msg
}

// call sends a request and decodes the JSON answer into out (if not nil).
func (c *client) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach %s: %w", c.where, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		var eb httpapi.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return &apiErr{resp.StatusCode, eb.Error.Code, tidy(eb.Error.Message)}
		}
		return fmt.Errorf("%s: HTTP %d: %s", c.where, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s: HTTP %d (a redirect to %s; not followed)", c.where, resp.StatusCode, resp.Header.Get("Location"))
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = data
		return nil
	}
	return json.Unmarshal(data, out)
}

// inProcess serves requests with a handler in this process.
type inProcess struct{ h http.Handler }

// RoundTrip implements http.RoundTripper.
func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	w := &recorder{header: http.Header{}, status: http.StatusOK}
	t.h.ServeHTTP(w, req)
	return &http.Response{StatusCode: w.status, Header: w.header, Body: io.NopCloser(&w.body), Request: req,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: int64(w.body.Len())}, nil
}

// recorder is the ResponseWriter of an in-process request.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

// Header implements http.ResponseWriter.
func (r *recorder) Header() http.Header { return r.header }

// WriteHeader implements http.ResponseWriter.
func (r *recorder) WriteHeader(s int) {
	if !r.wrote {
		r.status, r.wrote = s, true
	}
}

// Write implements http.ResponseWriter.
func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

// printJSON writes v (or raw JSON) indented for people; see indentJSON.
func printJSON(w io.Writer, v any) error {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	if err := indentJSON(&buf, raw, maxIndentDepth); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// maxIndentDepth is how many levels of a JSON document printJSON indents.
const maxIndentDepth = 16

// indentJSON writes src indented as json.Indent does with two spaces, but
// only its first maxDepth levels: deeper parts are written compact. The
// output then grows linearly with the input; fully indented, a small
// payload of deeply nested arrays (stored from an outside sender) grows
// with the square of its depth: 18 KB becomes 162 MB.
func indentJSON(dst *bytes.Buffer, src []byte, maxDepth int) error {
	var compact bytes.Buffer
	if err := json.Compact(&compact, src); err != nil {
		return err
	}
	src = compact.Bytes()
	newline := func(depth int) {
		dst.WriteByte('\n')
		for range depth {
			dst.WriteString("  ")
		}
	}
	depth, inString, escaped := 0, false, false
	for i := 0; i < len(src); i++ {
		b := src[i]
		if inString {
			dst.WriteByte(b)
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
			dst.WriteByte(b)
		case '{', '[':
			dst.WriteByte(b)
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				dst.WriteByte(src[i+1]) // empty: {} or []
				i++
				continue
			}
			depth++
			if depth <= maxDepth {
				newline(depth)
			}
		case '}', ']':
			if depth <= maxDepth {
				newline(depth - 1)
			}
			depth--
			dst.WriteByte(b)
		case ',':
			dst.WriteByte(b)
			if depth <= maxDepth {
				newline(depth)
			}
		case ':':
			dst.WriteByte(b)
			if depth <= maxDepth {
				dst.WriteByte(' ')
			}
		default:
			dst.WriteByte(b)
		}
	}
	return nil
}

// refuseMutations answers every request that could change something (any
// method but GET, HEAD and OPTIONS) with a READ_ONLY error.
func refuseMutations(h http.Handler, why string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		var eb httpapi.ErrorBody
		eb.Error.Code, eb.Error.Message = "READ_ONLY", why
		json.NewEncoder(w).Encode(eb)
	})
}
