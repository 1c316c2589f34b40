package browser

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// site is a local test site with varied pages: plain text, a page whose
// element appears late (script), a big page, error statuses, a rate limit
// with Retry-After, and a page that holds its answer until released.
type site struct {
	*httptest.Server
	mu       sync.Mutex
	inFlight int
	maxIn    int
	arrived  chan string // the path of each held request as it arrives
	hits     map[string]int
	release  chan struct{} // closed to let held requests answer
}

func newSite(t *testing.T) *site {
	s := &site{arrived: make(chan string, 64), release: make(chan struct{}), hits: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><title>Hello</title></head><body><h1 id="greeting">Hello, browser</h1><p class="note">second</p></body></html>`)
	})
	mux.HandleFunc("/late", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><title>Late</title></head><body><script>
setTimeout(function(){ var d=document.createElement("div"); d.id="late"; d.textContent="arrived"; document.body.appendChild(d); }, 200);
</script></body></html>`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("kb"))
		fmt.Fprintf(w, `<html><head><title>Big</title></head><body><pre id="data">%s</pre></body></html>`, strings.Repeat("0123456789abcdef\n", n*64))
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		if ra := r.URL.Query().Get("retry-after"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "<html><body>status %d</body></html>", code)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/hello", http.StatusFound)
	})
	mux.HandleFunc("/held", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.inFlight++
		s.maxIn = max(s.maxIn, s.inFlight)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inFlight--
			s.mu.Unlock()
		}()
		s.arrived <- r.URL.String()
		select {
		case <-s.release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, `<html><head><title>Held</title></head><body>released</body></html>`)
	})
	mux.HandleFunc("/favicon.ico", http.NotFound)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.releaseAll()
		s.Close()
	})
	return s
}

// releaseAll lets every held request answer, now and later.
func (s *site) releaseAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

// hitsOf is how many requests reached path.
func (s *site) hitsOf(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *site) maxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxIn
}
