package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/store/sqlitestore"
)

// target says where an operator command acts: a running server's API, or
// the database file directly when no server has it open.
type target struct {
	db, server, token string
	json              bool
}

func (t *target) flags(fs *flag.FlagSet) {
	fs.StringVar(&t.db, "db", envOr("YELLA_DB", "yella.db"), "the database file, used directly when no server has it open (env YELLA_DB)")
	fs.StringVar(&t.server, "server", os.Getenv("YELLA_SERVER"), "a running server's URL, such as http://127.0.0.1:3400 (env YELLA_SERVER)")
	fs.StringVar(&t.token, "token", "", "the server's access token (default: env YELLA_TOKEN)")
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
}

// connect picks the API of a server (when --server is given, or when a
// server holds the database) or opens the database itself.
func (t *target) connect(ctx context.Context) (*client, error) {
	token := t.token
	if token == "" {
		token = os.Getenv("YELLA_TOKEN")
	}
	if t.server != "" {
		return remote(t.server, token), nil
	}
	if _, err := os.Stat(t.db); err != nil {
		return nil, fmt.Errorf("no database at %s (give --db PATH, or --server URL for a running server)", t.db)
	}
	st, err := sqlitestore.Open(t.db, sqlitestore.Options{})
	if errors.Is(err, sqlitestore.ErrLocked) {
		// A server has the file: talk to it.
		return remote("http://"+defaultAddr, token), nil
	}
	if err != nil {
		return nil, err
	}
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		st.Close()
		return nil, err
	}
	// Emit and resume need the listeners: the ones "yella serve" runs.
	if err := registerDemo(eng, nil); err != nil {
		st.Close()
		return nil, err
	}
	api := httpapi.New(eng, httpapi.Options{Version: versionString()})
	return &client{base: "http://local", hc: &http.Client{Transport: inProcess{api}}, where: t.db,
		close: func() { api.Close(); st.Close() }}, nil
}

func remote(base, token string) *client {
	return &client{base: strings.TrimRight(base, "/"), hc: &http.Client{Timeout: 30 * time.Second}, token: token, where: base, close: func() {}}
}

// apiErr is an error answered by the API.
type apiErr struct {
	status        int
	code, message string
}

func (e *apiErr) Error() string { return fmt.Sprintf("%s (%s)", e.message, e.code) }

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
			return &apiErr{resp.StatusCode, eb.Error.Code, eb.Error.Message}
		}
		return fmt.Errorf("%s: HTTP %d: %s", c.where, resp.StatusCode, strings.TrimSpace(string(data)))
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

// printJSON writes v (or raw JSON) indented.
func printJSON(w io.Writer, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := w.Write(bytes.TrimRight(buf.Bytes(), "\n"))
		fmt.Fprintln(w)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
