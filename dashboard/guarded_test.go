package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/httpguard"
	"github.com/yella-go/yella/store"
)

// TestNoHandler: a run of a process the engine does not have says why it
// waits, on its page and in lists, and the processes page names the
// process with its waiting runs.
func TestNoHandler(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"01900000-0000-7000-8000-0000000000a1", "01900000-0000-7000-8000-0000000000a2"} {
		if _, err := f.st.Admit(context.Background(), store.Admission{Event: "export:requested", Payload: json.RawMessage(`{"report":"monthly"}`),
			Runs: []store.NewRun{{ID: id, Process: "legacy-export"}}, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	run := f.get("/runs/01900000-0000-7000-8000-0000000000a1")
	if run.Code != 200 {
		t.Fatalf("run page: %d", run.Code)
	}
	contains(t, "run page", run.Body, `id="no-handler"`, "No handler in this engine.", "<code>legacy-export</code>", "the run waits until a process of that name is registered")
	golden(t, "run-nohandler.html", normalise(run.Body))
	if strings.Contains(f.get("/runs/"+f.ok).Body, "no-handler") {
		t.Error("a run of a registered process says it has no handler")
	}
	list := f.get("/runs?status=idle")
	if n := strings.Count(list.Body, `class="badge nohandler"`); n != 2 {
		t.Errorf("runs list: %d no-handler badges, want 2", n)
	}
	procs := f.get("/processes")
	contains(t, "processes page", procs.Body, `id="unregistered"`, `<tr data-process="legacy-export"><td><strong>legacy-export</strong>`, `<td class="num">2</td>`,
		`/runs?process=legacy-export&amp;status=idle`)
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSignedIn: behind the guard, a browser signed in with a session is
// offered to sign out, and its actions are logged with its session; a
// program with the bearer token is logged as "token".
func TestSignedIn(t *testing.T) {
	f := newFixture(t)
	var logs syncBuffer
	dash, err := dashboard.NewAt(f.eng, dashboard.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, f.clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	const token = "dashboard-token-0123456789"
	g, err := httpguard.New(httpguard.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Handler(dash)
	serve := func(r *http.Request) *httptest.ResponseRecorder {
		r.Host = "127.0.0.1:3400"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	login := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var session *http.Cookie
	for _, c := range serve(login).Result().Cookies() {
		if c.Name == httpguard.SessionCookie {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session after signing in")
	}
	page := httptest.NewRequest("GET", "/", nil)
	page.AddCookie(session)
	if body := serve(page).Body.String(); !strings.Contains(body, `<form class="signout" method="post" action="/logout">`) {
		t.Fatal("a signed-in page does not offer to sign out")
	}
	page = httptest.NewRequest("GET", "/", nil)
	page.Header.Set("Authorization", "Bearer "+token)
	if body := serve(page).Body.String(); strings.Contains(body, `action="/logout"`) {
		t.Fatal("a page for the bearer token offers to sign out")
	}
	retry := httptest.NewRequest("POST", "/runs/"+f.failed+"/retry", nil)
	retry.Header.Set("Sec-Fetch-Site", "same-origin")
	retry.AddCookie(session)
	if w := serve(retry); w.Code != http.StatusSeeOther {
		t.Fatalf("retry: %d", w.Code)
	}
	if !strings.Contains(logs.String(), `"who":"session:`+session.Value[:8]+`"`) {
		t.Fatalf("the action log does not name the session: %s", logs.String())
	}
}
