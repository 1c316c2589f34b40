package dashboard_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/httpguard"
	"github.com/yella-go/yella/store/memstore"
)

// A program serving its own pages mounts Yella's JSON API and dashboard
// under /yella/, behind the guard: a bearer token for programs, a sign-in
// page for browsers, same-origin mutations, the Host allowlist. The prefix
// is stripped before the guard, and the dashboard and the guard are told it
// so that their links, redirects and cookies carry it.
func ExampleNew_mount() {
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New()}) // sqlitestore in production
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx)

	const prefix = "/yella"
	dash, err := dashboard.New(eng, dashboard.Options{Prefix: prefix}) // events at /yella/api/events
	if err != nil {
		log.Fatal(err)
	}
	ops := http.NewServeMux()
	ops.Handle("/api/", httpapi.New(eng, httpapi.Options{}))
	ops.Handle("/", dash)
	guard, err := httpguard.New(httpguard.Options{
		Token:  "an-access-token-of-16+-chars", // read it from a secret store
		Prefix: prefix,
	})
	if err != nil {
		log.Fatal(err)
	}
	site := http.NewServeMux()
	site.Handle(prefix+"/", http.StripPrefix(prefix, guard.Handler(ops)))
	site.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "the program's own page") })

	srv := httptest.NewServer(site) // http.ListenAndServe("127.0.0.1:8080", site) in a program
	defer srv.Close()
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	get := func(path, token string) {
		req, err := http.NewRequest("GET", srv.URL+path, nil)
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("Accept", "text/html")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		res.Body.Close()
		fmt.Println(strings.TrimSpace(fmt.Sprint(path, " ", res.StatusCode, " ", res.Header.Get("Location"))))
	}
	get("/", "")
	get("/yella/api/health", "")                           // open: a load balancer's check
	get("/yella/runs", "")                                 // a browser is sent to sign in
	get("/yella/runs", "an-access-token-of-16+-chars")     // the dashboard
	get("/yella/api/runs", "an-access-token-of-16+-chars") // the JSON API
	// Output:
	// / 200
	// /yella/api/health 200
	// /yella/runs 303 /yella/login?next=%2Fruns
	// /yella/runs 200
	// /yella/api/runs 200
}
