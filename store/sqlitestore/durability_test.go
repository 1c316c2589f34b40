package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"
)

// TestSynchronousModeOnWriter checks that the durability mode asked for is
// the one the writer's connection commits with: FULL fsyncs every commit
// (nothing acknowledged is lost on power loss), NORMAL does not. Trust
// TestPowerLoss proves what each mode survives; this test fails at once if
// the mode is not passed on.
func TestSynchronousModeOnWriter(t *testing.T) {
	for _, tc := range []struct {
		opt  Synchronous
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{"", 1}, {Normal, 1}, {Full, 2}, {"full", 2}} {
		s, err := Open(filepath.Join(t.TempDir(), "d.db"), Options{Synchronous: tc.opt})
		if err != nil {
			t.Fatal(err)
		}
		var got int
		err = s.do(context.Background(), func(w *wtx) error {
			return w.s.conn.QueryRowContext(w.ctx, "PRAGMA synchronous").Scan(&got)
		})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("Synchronous %q: the writer commits with synchronous=%d, want %d", tc.opt, got, tc.want)
		}
	}
}
