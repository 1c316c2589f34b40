package dashboard_test

import (
	"net/http/httptest"
	"testing"
)

// FuzzRunsQuery: any query string on the runs page (and the dead letters
// page, which parses the same filter) gives the page or a 400, never a
// server error.
func FuzzRunsQuery(f *testing.F) {
	for _, seed := range []string{"", "status=errored", "status=dead-letter&process=sync-crm", "status=bogus",
		"limit=0", "limit=200", "limit=99999999999999999999", "cursor=s1", "cursor=s-1", "cursor=zzz", "cursor=s99999999999999999999",
		"%zz", "root=1", "root=maybe", "order=oldest", "order=sideways", "page=-1", "page=2&cursor=s3",
		"fragment=list", "fragment=nope", "fragment=../layout", "process=%00", "event=%ff%fe", "status=all&status=idle",
		";;&&==", "process=" + string(make([]byte, 300))} {
		f.Add(seed)
	}
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, q string) {
		for _, path := range []string{"/runs", "/dead"} {
			req := httptest.NewRequest("GET", path, nil)
			req.URL.RawQuery = q
			rec := httptest.NewRecorder()
			fx.h.ServeHTTP(rec, req)
			if rec.Code != 200 && rec.Code != 400 {
				t.Fatalf("GET %s?%s: %d\n%.300s", path, q, rec.Code, rec.Body.String())
			}
		}
	})
}
