package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// TestWALLimit: while a reader holds a snapshot the WAL cannot start over,
// so writes grow it past the limit; once the reader lets go, the writer
// truncates it (Options.WALLimit). The control, with the limit off, shows
// that nothing else would: PASSIVE checkpoints leave the file at its size.
func TestWALLimit(t *testing.T) {
	defer func(d time.Duration) { walCheckEvery = d }(walCheckEvery)
	walCheckEvery = 0
	const limit = 256 << 10
	for _, tc := range []struct {
		name  string
		limit int64
		cut   bool
	}{{"limit", limit, true}, {"off", -1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "w.db")
			st, err := Open(db, Options{WALLimit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			pad, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 1000)})
			n := 0
			admit := func(k int) {
				t.Helper()
				for range k {
					n++
					_, err := st.Admit(ctx, store.Admission{Event: "ev", Payload: pad, Now: time.Now(),
						Runs: []store.NewRun{{ID: fmt.Sprintf("run-%d", n), Process: "p"}}})
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			walSize := func() int64 {
				fi, err := os.Stat(db + "-wal")
				if err != nil {
					return 0
				}
				return fi.Size()
			}
			admit(1)
			reader, err := sql.Open("sqlite", "file:"+db)
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Close()
			tx, err := reader.Begin()
			if err != nil {
				t.Fatal(err)
			}
			var count int
			if err := tx.QueryRow("SELECT count(*) FROM runs").Scan(&count); err != nil {
				t.Fatal(err)
			}
			admit(600) // about 1.2 MB of frames, none reusable while the snapshot is held
			if got := walSize(); got < 2*limit {
				t.Fatalf("with a reader holding a snapshot the WAL is %d bytes, want it past %d", got, 2*limit)
			}
			tx.Rollback()
			reader.Close()
			// The writer looks again after its back-off (1 s after the try
			// the reader blocked): keep writing a little until it has.
			deadline := time.Now().Add(10 * time.Second)
			if !tc.cut {
				deadline = time.Now().Add(2 * time.Second)
			}
			for walSize() >= limit && time.Now().Before(deadline) {
				admit(1)
				time.Sleep(50 * time.Millisecond)
			}
			if got := walSize(); (got < limit) != tc.cut {
				t.Errorf("after the reader let go the WAL is %d bytes; truncated below %d: %v, want %v", got, limit, got < limit, tc.cut)
			}
		})
	}
}

// With replication (AutoCheckpoint set) the limit is off unless asked for:
// Litestream owns the checkpoints.
func TestWALLimitDefaults(t *testing.T) {
	for _, tc := range []struct {
		in   Options
		want int64
	}{
		{Options{}, DefaultWALLimit},
		{Options{WALLimit: 1 << 20}, 1 << 20},
		{Options{WALLimit: -1}, 0},
		{Options{AutoCheckpoint: 10000}, 0},
		{Options{AutoCheckpoint: 10000, WALLimit: 1 << 20}, 1 << 20},
	} {
		got, err := tc.in.withDefaults()
		if err != nil || got.WALLimit != tc.want {
			t.Errorf("%+v: WALLimit %d, %v; want %d", tc.in, got.WALLimit, err, tc.want)
		}
	}
}
