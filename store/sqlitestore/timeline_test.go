package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// TestImplicitCompletionTimeline: a run completed by its first attempt
// writes no timeline row, and its timeline reads exactly as if its two
// entries had been written (times to the nanosecond, attempt, note); a
// completion with a note of its own, or after an earlier attempt, writes
// its entries, and so does a run whose rows were written before the
// implicit entries existed (schema version 4: read from its rows).
func TestImplicitCompletionTimeline(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tl.db")
	s, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	base := time.Unix(1_800_000_000, 123456789)
	type step struct {
		to   store.Status
		note string
	}
	cases := []struct {
		name  string
		steps []step
		rows  int // timeline rows written
	}{
		{"first attempt", []step{{store.StatusCompleted, ""}}, 0},
		{"own note", []step{{store.StatusCompleted, "done by hand"}}, 2},
		{"second attempt", []step{{store.StatusIdle, ""}, {store.StatusCompleted, ""}}, 4},
		{"failed", []step{{store.StatusErrored, ""}}, 2},
	}
	for ci, c := range cases {
		id := "tl-" + string(rune('a'+ci))
		if _, err := s.Admit(ctx, store.Admission{Event: "ev", Runs: []store.NewRun{{ID: id, Process: "tl"}}, Now: base}); err != nil {
			t.Fatal(err)
		}
		want := []store.TimelineEntry{{N: 1, At: base, Status: store.StatusIdle, Note: "admitted"}}
		now := base
		for i, st := range c.steps {
			now = now.Add(time.Second + time.Nanosecond)
			runs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
			if err != nil || len(runs) != 1 {
				t.Fatalf("%s: claim: %v, %d runs", c.name, err, len(runs))
			}
			want = append(want, store.TimelineEntry{N: len(want) + 1, At: now, Status: store.StatusRunning, Attempt: i + 1, Note: "claimed"})
			now = now.Add(time.Second + time.Nanosecond)
			u := store.Update{RunID: id, Epoch: runs[0].Epoch, Now: now, To: st.to, Note: st.note}
			note := st.note
			switch {
			case st.to == store.StatusIdle:
				u.Error, u.RetryAt = "try again", now
				if note == "" {
					note = "retry scheduled"
				}
			case st.to == store.StatusErrored:
				u.Error, u.ErrorCode = "it broke", "HANDLER_ERROR"
				if note == "" {
					note = "failed"
				}
			case note == "":
				note = "completed"
			}
			if _, err := s.Update(ctx, u); err != nil {
				t.Fatalf("%s: update: %v", c.name, err)
			}
			want = append(want, store.TimelineEntry{N: len(want) + 1, At: now, Status: st.to, Attempt: i + 1, Error: u.Error, Code: u.ErrorCode, Note: note})
		}
		got, err := s.Timeline(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		same := func(a, b store.TimelineEntry) bool {
			return a.At.Equal(b.At) && a.N == b.N && a.Status == b.Status && a.Attempt == b.Attempt && a.Error == b.Error && a.Code == b.Code && a.Note == b.Note
		}
		if !slices.EqualFunc(got, want, same) {
			t.Errorf("%s: timeline\n got %+v\nwant %+v", c.name, got, want)
		}
		var rows int
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM timeline t JOIN runs r ON r.seq = t.run_seq WHERE r.id = ?`, id).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != c.rows {
			t.Errorf("%s: %d timeline rows, want %d", c.name, rows, c.rows)
		}
		if c.rows == 0 {
			// The same run as version 4 wrote it: its two entries in rows.
			_, err := raw.ExecContext(ctx, `INSERT INTO timeline (run_seq, n, at, status, attempt, error, code, note)
				SELECT seq, 2, started_at, 'running', attempts, '', '', 'claimed' FROM runs WHERE id = ?1
				UNION ALL SELECT seq, 3, completed_at, status, attempts, error, error_code, 'completed' FROM runs WHERE id = ?1`, id)
			if err != nil {
				t.Fatal(err)
			}
			if again, err := s.Timeline(ctx, id); err != nil || !slices.EqualFunc(again, got, same) {
				t.Errorf("%s: timeline from rows\n got %+v, %v\nwant %+v", c.name, again, err, got)
			}
		}
	}
}
