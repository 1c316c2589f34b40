//go:build trust

package trust

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

func busy(err error) bool {
	if err == nil {
		return false
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "busy") || strings.Contains(s, "locked")
}

// longReader pins a snapshot for a second at a time, releasing it briefly
// between, as Litestream's replication does, until stop closes.
func longReader(db string, stop <-chan struct{}, errs *atomic.Int64) {
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(5000)")
	if err != nil {
		errs.Add(1)
		return
	}
	defer conn.Close()
	for {
		select {
		case <-stop:
			return
		default:
		}
		tx, err := conn.Begin()
		if err != nil {
			errs.Add(1)
			continue
		}
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM runs").Scan(&n); err != nil && busy(err) {
			errs.Add(1)
		}
		select {
		case <-time.After(time.Second):
		case <-stop:
		}
		tx.Rollback()
		time.Sleep(50 * time.Millisecond)
	}
}

// T6: the engine's discipline (one writer, BEGIN IMMEDIATE, busy_timeout
// in the DSN, a query-only read pool) never surfaces SQLITE_BUSY under
// emits, completions with effects, retention, heavy reads and a long
// reader; the same load on a deliberately wrong writer (deferred
// transactions, several writer connections) does.
func TestZeroBusy(t *testing.T) {
	r := newResult(t, "zero-busy")
	d := 10 * time.Second
	if *long {
		d = 60 * time.Second
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "busy.db")
	st, err := sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var errs busyTally
	eng := busyEngine(st, &errs)
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readerBusy, reads, emits atomic.Int64
	wg.Go(func() { longReader(db, stop, &readerBusy) })
	for range 4 {
		wg.Go(func() { busyEmitter(ctx, eng, &errs, &emits, stop) })
	}
	for range 2 {
		wg.Go(func() { busyReader(ctx, eng, &errs, &reads, stop) })
	}
	var peakWAL int64
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		if fi, err := os.Stat(db + "-wal"); err == nil {
			peakWAL = max(peakWAL, fi.Size())
		}
	}
	close(stop)
	wg.Wait()
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	errs.note("drain", eng.Drain(dctx))
	eng.Stop(ctx)
	m, _ := eng.Metrics(ctx)
	st.Close()
	r.check(t, "0 BUSY/LOCKED errors reach the engine or its callers", errs.busy.Load() == 0, "%d (first: %v)", errs.busy.Load(), errs.first)
	r.check(t, "0 other errors", errs.other.Load() == 0, "%d (first: %v)", errs.other.Load(), errs.first)
	r.check(t, "the long reader never saw BUSY", readerBusy.Load() == 0, "%d", readerBusy.Load())
	r.check(t, "WAL stays under 64 MiB despite the long reader", peakWAL < 64<<20, "peak %.1f MiB", float64(peakWAL)/(1<<20))
	r.check(t, "the load exercised completions and retention", m.Totals.Completed > 0 && m.Queue[yella.StatusCompleted] < m.Totals.Completed,
		"%d completed, %d still stored", m.Totals.Completed, m.Queue[yella.StatusCompleted])
	r.figure("busy_errors", float64(errs.busy.Load()))
	r.figure("emits", float64(emits.Load()))
	r.figure("runs_completed", float64(m.Totals.Completed))
	r.figure("read_rounds", float64(reads.Load()))
	r.figure("peak_wal_mib", float64(peakWAL)/(1<<20))

	// The negative control: the same kind of load through a deliberately
	// wrong writer must show BUSY, or this test could not fail.
	ctrl := controlLoad(t, filepath.Join(dir, "control.db"), min(d, 10*time.Second))
	r.check(t, "the negative control (deferred transactions, 4 writer connections) shows BUSY", ctrl.busy > 0,
		"%d BUSY of %d transactions", ctrl.busy, ctrl.txs)
	r.figure("control_busy_errors", float64(ctrl.busy))
	r.figure("control_transactions", float64(ctrl.txs))
}

// busyTally counts the errors TestZeroBusy's load meets, BUSY or LOCKED
// apart from the others, and keeps the first three.
type busyTally struct {
	busy, other atomic.Int64
	mu          sync.Mutex
	first       []string
}

func (e *busyTally) note(where string, err error) {
	if err == nil {
		return
	}
	if busy(err) {
		e.busy.Add(1)
	} else {
		e.other.Add(1)
	}
	e.mu.Lock()
	if len(e.first) < 3 {
		e.first = append(e.first, where+": "+err.Error())
	}
	e.mu.Unlock()
}

// busyEngine is TestZeroBusy's engine on st: short retention and a chain
// of two processes, the first with an effect; internal errors go to errs.
func busyEngine(st *sqlitestore.Store, errs *busyTally) *yella.Engine {
	eng, _ := yella.New(yella.Config{Store: st, Concurrency: 50, Retention: 2 * time.Second, RetentionInterval: 500 * time.Millisecond})
	eng.Register(yella.Process{Name: "work", On: "ev", Run: func(c *yella.Ctx) yella.Result {
		v, err := yella.Effect(c, "e", func(context.Context) (int, error) { time.Sleep(time.Millisecond); return 1, nil })
		if err != nil {
			return c.Error(err)
		}
		c.SetContext("v", v)
		return c.OK(v, yella.Then("next"))
	}})
	eng.Register(yella.Process{Name: "next", On: "next", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	eng.Subscribe(func(ev yella.Event) {
		if ev.Type == yella.InternalError {
			errs.note("internal "+ev.Context, errors.New(ev.Error))
		}
	})
	return eng
}

// busyEmitter emits about once a millisecond until stop closes.
func busyEmitter(ctx context.Context, eng *yella.Engine, errs *busyTally, emits *atomic.Int64, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Millisecond):
		}
		_, err := eng.Emit(ctx, "ev", map[string]string{"pad": strings.Repeat("x", 200)})
		errs.note("emit", err)
		emits.Add(1)
	}
}

// busyReader reads as an operator's tools do (listings, a chain,
// observability) until stop closes.
func busyReader(ctx context.Context, eng *yella.Engine, errs *busyTally, reads *atomic.Int64, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		p, err := eng.Runs(ctx, yella.RunQuery{Limit: 100, WithTotal: true})
		errs.note("runs", err)
		if len(p.Runs) > 0 {
			if _, err := eng.Chain(ctx, p.Runs[len(p.Runs)-1].ID); !errors.Is(err, yella.ErrRunNotFound) {
				errs.note("chain", err)
			}
		}
		_, err = eng.Runs(ctx, yella.RunQuery{Status: []yella.Status{yella.StatusErrored, yella.StatusDead, yella.StatusFenced}, Limit: 50})
		errs.note("runs by status", err)
		_, err = eng.Observability(ctx, yella.ObservabilityQuery{})
		errs.note("observability", err)
		reads.Add(1)
	}
}

type control struct{ busy, txs int64 }

// controlLoad admits, claims and completes runs the wrong way: 4 pooled
// writer connections, each transaction deferred (BEGIN, read, then write),
// with the long reader attached.
func controlLoad(t *testing.T, db string, d time.Duration) control {
	// The store creates the schema; the control then writes behind its back.
	st, err := sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=deferred")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(4)
	var c control
	var busyN, txs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readerBusy atomic.Int64
	wg.Add(1)
	go func() { defer wg.Done(); longReader(db, stop, &readerBusy) }()
	var seq atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				txs.Add(1)
				err := func() error {
					tx, err := conn.Begin()
					if err != nil {
						return err
					}
					defer tx.Rollback()
					var n int64
					if err := tx.QueryRow("SELECT count(*) FROM runs WHERE status = 'idle'").Scan(&n); err != nil {
						return err
					}
					s := seq.Add(1) + 1_000_000
					if _, err := tx.Exec(`INSERT INTO runs (seq, id, process, event, status, created_at) VALUES (?, ?, 'p', 'ev', 'idle', ?)`,
						s, uuid.NewString(), time.Now().UnixNano()); err != nil {
						return err
					}
					if _, err := tx.Exec(`UPDATE runs SET status = 'completed' WHERE seq = ?`, s-1); err != nil {
						return err
					}
					return tx.Commit()
				}()
				if busy(err) {
					busyN.Add(1)
				} else if err != nil {
					t.Logf("control: %v", err)
				}
			}
		}()
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	c.busy, c.txs = busyN.Load()+readerBusy.Load(), txs.Load()
	return c
}
