package replicate

import (
	"strings"
	"testing"
	"time"
)

// The stall watcher's judgement over sequences of observations, one every
// 500 ms, with StallAfter 5 s. Each step gives the WAL's version (a change
// is a write), Litestream's local and replica positions; want is the
// substring the verdict must hold after the last step ("" for none).
func TestStallWatch(t *testing.T) {
	type step struct {
		wal            int    // the WAL's content version: changes when it is written
		local, replica uint64 // Litestream's positions
		gone           string // "db" or "wal": that file removed
	}
	steady := func(n int) []step { // writes every step, staged every other step, uploaded one step later
		var s []step
		for i := range n {
			local := uint64(i/2 + 1)
			s = append(s, step{wal: i + 1, local: local, replica: max(local, 2) - 1})
		}
		return s
	}
	repeat := func(n int, st step) []step {
		s := make([]step, n)
		for i := range s {
			s[i] = st
		}
		return s
	}
	cat := func(parts ...[]step) []step {
		var out []step
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		steps []step
		want  string
	}{
		{"steady load, replica following", steady(60), ""},
		{"idle, all replicated", repeat(60, step{wal: 7, local: 9, replica: 9}), ""},
		{"load then idle", cat(steady(20), repeat(40, step{wal: 20, local: 11, replica: 11})), ""},
		{"the last write never staged", cat(steady(20), repeat(40, step{wal: 20, local: 10, replica: 10})), "not been copied from the WAL"},
		{"a write staged at the next sync", cat(repeat(10, step{wal: 1, local: 3, replica: 3}), []step{{wal: 2, local: 3, replica: 3}},
			repeat(30, step{wal: 2, local: 4, replica: 4})), ""},
		{"writes not staged for 5 s: not yet", cat(steady(10), repeat(10, step{wal: 99, local: 5, replica: 5})), ""},
		{"writes not staged", cat(steady(10), repeat(12, step{wal: 99, local: 5, replica: 5})), "not been copied from the WAL"},
		{"writes going on, none staged", cat(steady(10), func() []step {
			var s []step
			for i := range 12 {
				s = append(s, step{wal: 100 + i, local: 5, replica: 5})
			}
			return s
		}()), "not been copied from the WAL"},
		{"staged, never uploaded", cat(steady(10), func() []step {
			var s []step
			for i := range 12 {
				s = append(s, step{wal: 100 + i, local: uint64(6 + i), replica: 4})
			}
			return s
		}()), "not reached the replica"},
		{"replica position lost after an error, then back", cat(steady(10),
			repeat(8, step{wal: 10, local: 6, replica: 0}), repeat(20, step{wal: 10, local: 6, replica: 6})), ""},
		{"replica position lost for good", cat(steady(10), repeat(12, step{wal: 10, local: 6, replica: 0})), "not reached the replica"},
		{"Litestream resets its local state", cat(steady(10), repeat(20, step{wal: 10, local: 2, replica: 2})), ""},
		{"WAL removed", cat(steady(4), []step{{wal: 4, local: 2, replica: 1, gone: "wal"}}), "WAL file /db/app.db-wal was removed"},
		{"database removed", cat(steady(4), []step{{wal: 4, local: 2, replica: 1, gone: "db"}}), "database file /db/app.db was removed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			obs := func(i int, s step) observation {
				o := observation{now: t0.Add(time.Duration(i) * 500 * time.Millisecond), walSize: int64(s.wal) * 4096,
					walMod: t0.Add(time.Duration(s.wal) * time.Millisecond), local: s.local, localOK: true, replica: s.replica,
					syncErr: "ensure wal exists: disk I/O error", replicaErr: "upload: connection refused"}
				switch s.gone {
				case "db":
					o.dbGone = "removed"
				case "wal":
					o.walGone = "removed"
				}
				return o
			}
			w := newStallWatch("/db/app.db", 5*time.Second, obs(0, c.steps[0]))
			got := ""
			for i, s := range c.steps {
				got = w.observe(obs(i+1, s))
				if c.want == "" && got != "" {
					t.Fatalf("step %d: stalled: %s", i, got)
				}
			}
			if c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("verdict %q, want one saying %q", got, c.want)
			}
			t.Logf("%q", got)
		})
	}
}
