package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/yella-go/yella/store"
)

// writerCache is the writer connection's page-cache memory, in bytes, as
// SQLite accounts it (sqlite3_db_status CACHE_USED).
func writerCache(t *testing.T, s *Store) int {
	t.Helper()
	var used int
	err := s.conn.Raw(func(dc any) error {
		st, ok := dc.(sqlite.DBStatus)
		if !ok {
			return fmt.Errorf("driver connection %T has no DBStatus", dc)
		}
		cur, _, err := st.Status(sqlite.DBStatusCacheUsed, false)
		used = cur
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return used
}

// TestWriterShrinksItsCache checks that the writer hands its page cache
// back every shrinkEvery, and that without it the cache stays full: the
// control proves the measurement can see the difference.
func TestWriterShrinksItsCache(t *testing.T) {
	defer func(d time.Duration) { shrinkEvery = d }(shrinkEvery)
	// fill writes about 5 MB of rows, more than the 2 MB cache holds, then
	// reports the writer's cache; with small > 0 it polls until the cache is at
	// most small, since the writer shrinks just after it answers a batch.
	fill := func(t *testing.T, every time.Duration, small int) int {
		shrinkEvery = every // read by Open's writer goroutine, which starts after this
		s, err := Open(filepath.Join(t.TempDir(), "y.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		payload, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 1500)})
		ctx := context.Background()
		for i := range 3000 {
			_, err := s.Admit(ctx, store.Admission{Event: "e", Payload: payload, Now: time.Now(),
				Runs: []store.NewRun{{ID: fmt.Sprintf("run-%05d", i), Process: "p"}}})
			if err != nil {
				t.Fatal(err)
			}
		}
		used := writerCache(t, s)
		for deadline := time.Now().Add(5 * time.Second); small > 0 && used > small && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			used = writerCache(t, s)
		}
		return used
	}
	const mib = 1 << 20
	if kept := fill(t, time.Hour, 0); kept < mib {
		t.Fatalf("control: without shrinking the writer's cache holds %d bytes; want it full (about 2 MB)", kept)
	}
	if left := fill(t, 0, 256<<10); left > 256<<10 {
		t.Fatalf("shrinking after every batch left %d bytes in the writer's cache; want at most 256 KiB", left)
	}
}
