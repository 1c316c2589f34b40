package pgstore

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestInFlightStatementsReadTheirIndex: on tables the statistics do not
// know yet (20,000 idle runs of one process, a few running runs of two
// owners), every statement that looks for in-flight runs by lease owner
// or by process reads runs_inflight and nothing of the table beyond it:
// counting a process's running runs (a capped claim) reads none of its
// backlog, nor does looking for the idle runs of processes that have
// none among another's, and a node's heartbeat, holdings and reclaims
// read only its own runs; each reads a bounded range of the index (an
// index condition), never all of it, which holds every idle run. Inside
// a writer transaction (writerPlan) and outside one (where a bitmap of
// the range may serve).
func TestInFlightStatementsReadTheirIndex(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "inflightplan")
	sch := s.q.schema
	for _, q := range []string{
		`INSERT INTO ` + sch + `.runs (id, process, event, status, created_at) SELECT 'r' || g, 'p', 'e', 'idle', g FROM generate_series(1, 20000) g`,
		`INSERT INTO ` + sch + `.owners (owner) VALUES ('o0'), ('o1')`,
		`INSERT INTO ` + sch + `.runs (id, process, event, status, created_at, epoch, lease_node, lease_expires)
			SELECT 'x' || g, 'q', 'e', 'running', g, 1, o.num, g FROM generate_series(1, 20) g JOIN ` + sch + `.owners o ON o.owner = 'o' || (g % 2)`,
		`INSERT INTO ` + sch + `.nodes (owner) VALUES ('o0'), ('o1')`,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	procs := []string{"p", "q"}
	for _, writer := range []bool{true, false} {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if writer {
			for _, set := range writerPlan {
				if _, err := tx.Exec(ctx, set); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, c := range []struct {
			name, sql string
			args      []any
			backlog   bool // it counts the idle runs: it reads them
		}{
			{"active runs of processes", s.q.activeCounts, []any{procs}, true},
			{"active runs of processes without a backlog", s.q.activeCounts, []any{[]string{"q", "z"}}, false},
			{"running runs of processes", s.q.runningCounts, []any{procs}, false},
			{"whether processes without a backlog have idle runs", s.q.claimMore, []any{[]string{"q", "z"}, int64(5)}, false},
			{"heartbeat", s.q.heartbeat, []any{int64(100), "o1"}, false},
			{"a rejoining node's runs", s.q.nodeAbandon, []any{"o1"}, false},
			{"nodes' holdings", s.q.nodeHeld, []any{[]string{"o0", "o1"}}, false},
			{"gone nodes forgotten", s.q.nodeForget, nil, false},
			{"abandoned runs", s.q.selAbandoned, []any{"o0", int64(10), 100, 30.0}, false},
		} {
			plan := explain(t, tx, c.sql, c.args...)
			lines := strings.Split(plan, "\n")
			found := false
			for i, l := range lines {
				if !strings.Contains(l, "runs_inflight") {
					continue
				}
				found = true
				if i+1 == len(lines) || !strings.Contains(lines[i+1], "Index Cond:") {
					t.Errorf("%s (writer %v): the plan reads all of runs_inflight:\n%s", c.name, writer, plan)
				}
			}
			if !found {
				t.Errorf("%s (writer %v): the plan does not read runs_inflight:\n%s", c.name, writer, plan)
			}
			bads := []string{"Seq Scan on runs", "using runs_pkey", "using runs_idle", "on runs_idle"}
			if writer {
				bads = append(bads, "Bitmap Heap Scan on runs")
			}
			for _, bad := range bads {
				if strings.Contains(plan, bad) {
					t.Errorf("%s (writer %v): the plan has %q:\n%s", c.name, writer, bad, plan)
				}
			}
			// Run, it reads a few dozen pages: a scan of the whole index
			// visits every idle run's row (about 340 pages). The bound is
			// half of that: the statements that write (heartbeats,
			// reclaims) read more or less as the table's free space
			// moves (25 to 101 buffers measured, the most under the
			// mutation check's concurrent load).
			if n := buffersRead(t, tx, c.sql, c.args...); !c.backlog && n > 170 {
				t.Errorf("%s (writer %v): %d buffers read, want a few dozen, far from a scan of the backlog:\n%s", c.name, writer, n, plan)
			}
		}
		tx.Rollback(ctx)
	}
}

// buffersRead runs sql with args in tx (inside a savepoint, rolled back)
// and returns how many shared buffers it read, hit or not.
func buffersRead(t *testing.T, tx pgx.Tx, sql string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	sp, err := tx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Rollback(ctx)
	plan := explain(t, sp, "(ANALYZE, BUFFERS) "+sql, args...)
	m := regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`).FindStringSubmatch(plan)
	if m == nil {
		return 0 // nothing read at all
	}
	hit, _ := strconv.Atoi(m[1])
	read, _ := strconv.Atoi(m[2])
	return hit + read
}
