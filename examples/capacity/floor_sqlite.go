package main

import (
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the driver the engine's SQLite store uses
)

// THE FLOOR. Not an engine: the minimal durable work of this design, on
// the same driver and settings as the engine's SQLite store (WAL,
// synchronous=NORMAL, busy_timeout, 2 KiB pages). One writer goroutine owns
// the only connection and commits up to 256 operations per BEGIN IMMEDIATE
// … COMMIT; runs are dispatched in memory to 50 goroutines; per run it
// writes exactly: the run inserted (id, process, event, ~100 B payload,
// state, created_at); updated to running (lease owner, epoch, started_at),
// durable before the handler runs; updated to completed (result,
// completed_at, fenced on the epoch), durable before the worker takes its
// next run. An effect is inserted as started (durable before its body) and
// updated to completed in the run's completion transaction; a chain's
// stage 2 is inserted in stage 1's completion transaction. A batch enqueue
// inserts 500 rows per statement. Engine figures are reported as a
// fraction of the floor measured in the same run.

const floorSchema = `CREATE TABLE runs (id TEXT PRIMARY KEY, process TEXT NOT NULL, event TEXT NOT NULL, payload BLOB, state TEXT NOT NULL,
  lease_owner TEXT, epoch INTEGER NOT NULL DEFAULT 0, result BLOB, created_at INTEGER NOT NULL, started_at INTEGER, completed_at INTEGER) WITHOUT ROWID;
CREATE TABLE effects (run_id TEXT NOT NULL, key TEXT NOT NULL, state TEXT NOT NULL, epoch INTEGER NOT NULL, output BLOB,
  PRIMARY KEY (run_id, key)) WITHOUT ROWID;`

type stmt struct {
	q    string
	args []any
}

type floorOp struct {
	stmts []stmt
	done  chan struct{}
}

type floor struct {
	db  *sql.DB
	ops chan *floorOp
	ps  map[string]*sql.Stmt // prepared once, owned by the writer
}

func openFloor(path string) (*floor, error) { return openFloorOn(path, floorSchema) }

// openFloorOn opens the floor on the database at path, creating schema
// first unless it is empty (the database has its tables).
func openFloorOn(path, schema string) (*floor, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=page_size(2048)&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if schema != "" {
		if _, err := db.Exec(schema); err != nil {
			return nil, err
		}
	}
	f := &floor{db: db, ops: make(chan *floorOp, 1024), ps: map[string]*sql.Stmt{}}
	go f.writer()
	return f, nil
}

// writer commits whatever is queued, up to 256 operations per transaction.
func (f *floor) writer() {
	for op := range f.ops {
		batch := []*floorOp{op}
	fill:
		for len(batch) < 256 {
			select {
			case op := <-f.ops:
				batch = append(batch, op)
			default:
				break fill
			}
		}
		f.exec("BEGIN IMMEDIATE")
		for _, op := range batch {
			for _, s := range op.stmts {
				f.exec(s.q, s.args...)
			}
		}
		f.exec("COMMIT")
		for _, op := range batch {
			close(op.done)
		}
	}
}

func (f *floor) exec(q string, args ...any) {
	p := f.ps[q]
	if p == nil {
		var err error
		if p, err = f.db.Prepare(q); err != nil {
			fatal(fmt.Errorf("floor: %w", err))
		}
		f.ps[q] = p
	}
	if _, err := p.Exec(args...); err != nil {
		fatal(fmt.Errorf("floor: %s: %w", q, err))
	}
}

// do queues statements as one operation and waits until they are durable.
func (f *floor) do(stmts ...stmt) {
	op := &floorOp{stmts: stmts, done: make(chan struct{})}
	f.ops <- op
	<-op.done
}

func (f *floor) close() { close(f.ops); f.db.Close() }

// floorTable is the runs table a floor works on, as its statements: insert
// (ids, their event, the time), claim (args started_at, id) and complete
// (args result, completed_at, id, fenced on epoch 1). schema creates the
// table ("": the database has it).
type floorTable struct {
	schema          string
	insert          func(ids []string, event string, now int64) stmt
	claim, complete string
}

// ownTable is the floor's own table: one B-tree keyed by the run's id.
var ownTable = floorTable{
	schema:   floorSchema,
	insert:   insertRows,
	claim:    "UPDATE runs SET state = 'running', lease_owner = 'floor', epoch = epoch + 1, started_at = ? WHERE id = ? AND state = 'idle'",
	complete: "UPDATE runs SET state = 'completed', result = ?, completed_at = ? WHERE id = ? AND state = 'running' AND epoch = 1",
}

func insertRows(ids []string, event string, now int64) stmt {
	q := "INSERT INTO runs (id, process, event, payload, state, created_at) VALUES " +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, 'idle', ?),", len(ids)), ",")
	args := make([]any, 0, 5*len(ids))
	for _, id := range ids {
		args = append(args, id, event, event, payload100(id), now)
	}
	return stmt{q, args}
}

// runFloor runs a workload on the floor: n root runs (each with one more
// stage for a chain), enqueued by 500-row statements ("batch") or by 8
// concurrent single-row inserts ("single"), executed by 50 workers, on
// table t (the effect and chain workloads need the floor's own). The
// window starts before the first insert and ends at the last durable
// completion.
func runFloor(path string, t floorTable, work, mode string, roots int) (result, error) {
	f, err := openFloorOn(path, t.schema)
	if err != nil {
		return result{}, err
	}
	defer f.close()
	runs := roots
	if work == "chain" {
		runs *= 2
	}
	ready := make(chan [2]string, runs) // id, event
	var done sync.WaitGroup
	done.Add(runs)
	now := func() int64 { return time.Now().UnixNano() }
	for range fleetConc {
		go func() {
			for r := range ready {
				id, ev := r[0], r[1]
				f.do(stmt{t.claim, []any{now(), id}})
				fin := stmt{t.complete, []any{`{"ok":1}`, now(), id}}
				switch {
				case work == "effect":
					f.do(stmt{"INSERT INTO effects (run_id, key, state, epoch) VALUES (?, 'e1', 'started', 1)", []any{id}})
					f.do(stmt{"UPDATE effects SET state = 'completed', output = '1' WHERE run_id = ? AND key = 'e1' AND epoch = 1", []any{id}}, fin)
				case work == "chain" && ev == "a":
					next := id + "-b"
					f.do(fin, t.insert([]string{next}, "b", now()))
					ready <- [2]string{next, "b"}
				default:
					f.do(fin)
				}
				done.Done()
			}
		}()
	}
	w0, c0, t0 := writeBytes(), cpuSeconds(), time.Now()
	ev := "a"
	if mode == "batch" {
		for i := 0; i < roots; i += 500 {
			ids := make([]string, 0, 500)
			for j := i; j < min(i+500, roots); j++ {
				ids = append(ids, newFloorID(j))
			}
			f.do(t.insert(ids, ev, now()))
			for _, id := range ids {
				ready <- [2]string{id, ev}
			}
		}
	} else {
		var wg sync.WaitGroup
		for g := range emitters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < roots; i += emitters {
					id := newFloorID(i)
					f.do(t.insert([]string{id}, ev, now()))
					ready <- [2]string{id, ev}
				}
			}()
		}
		wg.Wait()
	}
	done.Wait()
	el := time.Since(t0)
	close(ready)
	return window(runs, el, w0, c0), nil
}

// floorInsert times 10,000 sequential single-row durable inserts: the
// floor of an Emit.
func floorInsert(path string) (result, error) {
	f, err := openFloor(path)
	if err != nil {
		return result{}, err
	}
	defer f.close()
	lat := make([]time.Duration, nEmits)
	w0, c0, t0 := writeBytes(), cpuSeconds(), time.Now()
	for i := range lat {
		s := time.Now()
		f.do(insertRows([]string{newFloorID(i)}, "a", s.UnixNano()))
		lat[i] = time.Since(s)
	}
	r := window(nEmits, time.Since(t0), w0, c0)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r.P50us, r.P99us, r.MaxUs = us(lat[nEmits/2]), us(lat[nEmits*99/100]), us(lat[nEmits-1])
	return r, nil
}

// newFloorID is a 36-byte id that sorts by creation, like the engine's
// UUIDv7 run ids.
func newFloorID(i int) string {
	return fmt.Sprintf("%08x-0000-7000-8000-%012x", time.Now().Unix(), i)
}

// payload100 is a payload of about 100 bytes, the size both the floor and
// the engine's end-to-end measurements admit.
func payload100(id string) []byte {
	return []byte(`{"id":"` + id + `","note":"a payload of about one hundred bytes, padded"}`)
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
