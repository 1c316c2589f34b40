package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yella-go/yella/store/pgstore"
)

// The PostgreSQL floor: the least durable work this design does per run,
// on the same driver and server as the engine, batched as the engine
// batches. Each run is inserted (500 per statement, like admission
// batches), claimed with FOR UPDATE SKIP LOCKED in claims sized as the
// engine sizes them (free slots plus a quarter, at least half that
// quarter), handed to 50 goroutines in memory, and completed by an UPDATE
// fenced on its epoch. One writer goroutine commits whatever is queued (up
// to floorMaxBatch commands) in one transaction and answers only after
// COMMIT. The one-effect variant records the effect as started (durable
// before the body runs) and completes it with its run; the chain variant
// inserts stage 2 in the transaction that completes stage 1. No status
// counts, timeline, notifications, leases or nodes: those are the engine's
// extra cost over the floor.

const floorMaxBatch = 256 // the engine's writer batch (pgstore.Options.MaxBatch default)

const floorDDL = `CREATE SCHEMA %[1]s;
CREATE TABLE %[1]s.runs (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, stage int NOT NULL, status text NOT NULL,
	epoch bigint NOT NULL DEFAULT 0, payload bytea, output bytea);
CREATE INDEX ON %[1]s.runs (seq) WHERE status = 'idle';
CREATE TABLE %[1]s.effects (run_seq bigint NOT NULL, key text NOT NULL, status text NOT NULL, output bytea, PRIMARY KEY (run_seq, key));`

type floorCmd struct {
	insert [][]byte // admit runs with these payloads, or:
	claim  int      // claim this many runs, or:
	start  *fRun    // record an effect started, or:
	done   *fRun    // complete a run (and its effect; insert stage 2 of a chain)
	got    []fRun   // claimed runs
	ack    chan struct{}
}

type fRun struct {
	seq, epoch int64
	stage      int
}

// floorRun runs the floor for workload w ("noop", "effect", "chain") on a
// fresh schema: setup and admission, then ready() and, once it returns,
// the timed drain. It returns the drain's commands and transactions, as
// the engine's store counts them.
//
// Two diagnostics (no-op runs only) change the table under the floor's
// work, by shape:
//
//   - "schema": the engine's tables instead of the floor's own: the schema
//     created by the engine's store, runs inserted with the columns an
//     admission must set, claimed in the engine's claim order with a lease
//     as the engine's claims take one, and completed as an attempt end
//     completes them. The distance from the floor to it is what the
//     engine's schema costs before any engine code runs.
//   - "cols": the floor's table and its one index, with the columns of the
//     engine's run row added and set as the engine sets them for a no-op
//     run (its id, process and event, a lease with its owner's number,
//     its times, attempts and timeline count). Each
//     status change writes a new version of the whole row: the distance
//     from the floor to it is what the row's width costs alone, and from
//     it to "schema" what the engine's other indexes and tables cost.
//
// The shape "e2e" is the floor end to end: nothing is admitted before
// ready(); the runs (the chain's roots) are inserted inside the timed
// window, 500 to a command through the floor's writer, one command after
// another, while the drain goes on, as an application emitting batches
// of 500 to a running engine admits them. "schema-e2e" (no-op runs only)
// is "schema" end to end in the same way: the distance from the floor end
// to end to it is what the engine's schema costs a user who emits while
// the engine drains.
//
// Any other shape is the floor itself.
func floorRun(url, schema, w string, n int, shape string, ready func()) (cmdCount, txCount int64, err error) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return 0, 0, err
	}
	// The floor's statements find their rows by key whatever the
	// statistics say, as the engine's writer's do: a statement planned on
	// a table still empty (the end-to-end shape admits nothing before its
	// window) would otherwise keep a plan that reads the whole table.
	for _, k := range []string{"enable_seqscan", "enable_hashjoin", "enable_mergejoin", "enable_bitmapscan", "jit"} {
		cfg.ConnConfig.RuntimeParams[k] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	s := pgx.Identifier{schema}.Sanitize()
	q := floorStatements(s)
	if shape != "floor" && shape != "e2e" && w != "noop" && (shape != "schema" || w != "effect") {
		return 0, 0, fmt.Errorf("the %s diagnostic runs no-op runs only (schema: and one-effect runs), not %q", shape, w)
	}
	switch shape {
	case "schema", "schema-e2e":
		st, err := pgstore.Open(ctx, url, pgstore.Options{Schema: schema}) // the engine's schema
		if err != nil {
			return 0, 0, err
		}
		st.Close()
		q = floorOnEngineStatements(s, w == "effect")
	case "cols":
		if _, err := pool.Exec(ctx, fmt.Sprintf(floorDDL+floorColsDDL, s)); err != nil {
			return 0, 0, err
		}
		q = floorColsStatements(s)
	default:
		if _, err := pool.Exec(ctx, fmt.Sprintf(floorDDL, s)); err != nil {
			return 0, 0, err
		}
	}
	total, roots := n, n
	if w == "chain" {
		roots = n / 2
	}
	page := func(i int) [][]byte {
		var ps [][]byte
		for j := i; j < min(i+500, roots); j++ {
			ps = append(ps, fmt.Appendf(nil, `{"i":%d}`, j))
		}
		return ps
	}
	inWindow := shape == "e2e" || shape == "schema-e2e"
	for i := 0; i < roots && !inWindow; i += 500 {
		if _, err := pool.Exec(ctx, q.insert, page(i)); err != nil {
			return 0, 0, err
		}
	}
	ready()

	cmds := make(chan *floorCmd, 4*floorMaxBatch)
	writerDone := make(chan error, 1)
	go func() { // the group-commit writer
		batch := make([]*floorCmd, 0, floorMaxBatch)
		for c := range cmds {
			batch = append(batch[:0], c)
			for round := 0; round < 2 && len(batch) < floorMaxBatch; round++ {
				if round > 0 {
					runtime.Gosched()
				}
			fill:
				for len(batch) < floorMaxBatch {
					select {
					case c := <-cmds:
						batch = append(batch, c)
					default:
						break fill
					}
				}
			}
			if err := floorCommit(ctx, pool, batch, w, q); err != nil {
				writerDone <- err
				for range cmds {
				}
				return
			}
			cmdCount, txCount = cmdCount+int64(len(batch)), txCount+1
			for _, c := range batch {
				close(c.ack)
			}
		}
		writerDone <- nil
	}()
	do := func(c *floorCmd) *floorCmd {
		c.ack = make(chan struct{})
		cmds <- c
		<-c.ack
		return c
	}

	// inserted wakes the claimer when runs were admitted (e2e), as a
	// notification wakes the engine's nodes.
	inserted := make(chan struct{}, 1)
	if inWindow {
		go func() {
			for i := 0; i < roots; i += 500 {
				do(&floorCmd{insert: page(i)})
				select {
				case inserted <- struct{}{}:
				default:
				}
			}
		}()
	}

	const conc, buffer = fleetConc, fleetConc / 4
	work := make(chan fRun, conc+buffer)
	freed := make(chan struct{}, 1)
	var mu sync.Mutex
	outstanding, completed := 0, 0
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				if w == "effect" {
					do(&floorCmd{start: &r})
				}
				do(&floorCmd{done: &r})
				mu.Lock()
				outstanding--
				completed++
				mu.Unlock()
				select {
				case freed <- struct{}{}:
				default:
				}
			}
		}()
	}
	// The claimer: claims like the engine's claim loop (free slots plus a
	// buffer, at least half the buffer while runs are in hand).
	for {
		mu.Lock()
		out, comp := outstanding, completed
		mu.Unlock()
		if comp >= total {
			break
		}
		want := conc + buffer - out
		if want >= buffer/2 || out == 0 {
			c := do(&floorCmd{claim: want})
			mu.Lock()
			outstanding += len(c.got)
			mu.Unlock()
			for _, r := range c.got {
				work <- r
			}
			if len(c.got) == want {
				continue
			}
		}
		select {
		case <-freed:
		case <-inserted:
		case err := <-writerDone:
			return 0, 0, err
		}
	}
	close(work)
	wg.Wait()
	close(cmds)
	err = <-writerDone // received after the writer's last count: no race
	return cmdCount, txCount, err
}

// floorSQL are the statements of a floor: insert (a page of payloads),
// claim ($1 runs), start (effects of runs $1 at epochs $2) and done (runs
// $1 at epochs $2; with workloads, $3: complete their effect, $4: insert
// their stage 2).
type floorSQL struct {
	insert, claim, start, done string
	workloads                  bool
}

func floorStatements(s string) floorSQL {
	return floorSQL{
		insert: `INSERT INTO ` + s + `.runs (stage, status, payload) SELECT 1, 'idle', p FROM unnest($1::bytea[]) p`,
		claim: `UPDATE ` + s + `.runs r SET status = 'running', epoch = epoch + 1
		WHERE seq = ANY(ARRAY(SELECT seq FROM ` + s + `.runs WHERE status = 'idle' ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED))
		RETURNING seq, epoch, stage`,
		start: `INSERT INTO ` + s + `.effects (run_seq, key, status)
		SELECT r.seq, 'e1', 'started' FROM unnest($1::bigint[], $2::bigint[]) i(seq, epoch)
		JOIN ` + s + `.runs r ON r.seq = i.seq AND r.epoch = i.epoch AND r.status = 'running'`,
		done: `WITH u AS (UPDATE ` + s + `.runs r SET status = 'completed', output = 'null'
			FROM unnest($1::bigint[], $2::bigint[]) i(seq, epoch)
			WHERE r.seq = i.seq AND r.epoch = i.epoch AND r.status = 'running' RETURNING r.seq, r.stage, r.payload),
		e AS (UPDATE ` + s + `.effects e SET status = 'completed', output = '1' FROM u WHERE $3 AND e.run_seq = u.seq AND e.key = 'e1')
		INSERT INTO ` + s + `.runs (stage, status, payload) SELECT 2, 'idle', payload FROM u WHERE $4 AND u.stage = 1`,
		workloads: true,
	}
}

// floorOnEngineStatements are the no-op floor's statements on the engine's
// runs table (times in Unix nanoseconds from the server's clock), or with
// effect the one-effect floor's: its effect records in the engine's
// effects table, each started with its run's epoch and completed with
// its run.
func floorOnEngineStatements(s string, effect bool) floorSQL {
	const now = `(extract(epoch FROM clock_timestamp()) * 1e9)::bigint`
	q := floorOnEngineNoop(s, now)
	if effect {
		q.start = `INSERT INTO ` + s + `.effects (run_seq, key, status, epoch, started_at)
		SELECT r.seq, 'e1', 'started', r.epoch, ` + now + ` FROM unnest($1::bigint[], $2::bigint[]) i(seq, epoch)
		JOIN ` + s + `.runs r ON r.seq = i.seq AND r.epoch = i.epoch AND r.status = 'running'`
		// $4 (a chain's stage 2) is never set: the statement reads it so
		// that it takes the workloads' arguments.
		q.done = `WITH u AS (` + q.done + ` RETURNING r.seq)
		UPDATE ` + s + `.effects e SET status = 'completed', output = '1', completed_at = ` + now + `
		FROM u WHERE $3 AND NOT $4 AND e.run_seq = u.seq AND e.key = 'e1'`
		q.workloads = true
	}
	return q
}

// floorOnEngineNoop are floorOnEngineStatements for no-op runs.
func floorOnEngineNoop(s, now string) floorSQL {
	return floorSQL{
		insert: `WITH r AS (INSERT INTO ` + s + `.runs (id, process, event, status, payload, created_at)
			SELECT gen_random_uuid()::text, 'noop', 'cap:noop', 'idle', p, ` + now + ` FROM unnest($1::bytea[]) p RETURNING id, seq)
			INSERT INTO ` + s + `.run_ids (id, seq) SELECT id, seq FROM r`,
		claim: `UPDATE ` + s + `.runs r SET status = 'running', epoch = epoch + 1, attempts = attempts + 1, lease_node = 1,
			lease_expires = ` + now + ` + 30000000000, started_at = ` + now + `
		WHERE seq = ANY(ARRAY(SELECT seq FROM ` + s + `.runs WHERE status = 'idle'
			ORDER BY (created_at - coalesce(priority, 0)::bigint * 60000000000), seq LIMIT $1 FOR UPDATE SKIP LOCKED))
		RETURNING seq, epoch, 1`,
		done: `UPDATE ` + s + `.runs r SET status = 'completed', output = 'null', completed_at = ` + now + `,
			lease_node = NULL, lease_expires = NULL, tl = tl + 2
		FROM unnest($1::bigint[], $2::bigint[]) i(seq, epoch)
		WHERE r.seq = i.seq AND r.epoch = i.epoch AND r.status = 'running'`,
	}
}

// floorColsDDL adds to the floor's runs table the engine's run columns
// that the floor lacks, with the engine's types and defaults.
const floorColsDDL = `
ALTER TABLE %[1]s.runs ADD COLUMN id text, ADD COLUMN process text, ADD COLUMN event text, ADD COLUMN correlation_id text,
	ADD COLUMN parent_id text, ADD COLUMN depth integer NOT NULL DEFAULT 0, ADD COLUMN context bytea,
	ADD COLUMN error text NOT NULL DEFAULT '', ADD COLUMN error_code text NOT NULL DEFAULT '', ADD COLUMN then_event text NOT NULL DEFAULT '',
	ADD COLUMN idem_key text, ADD COLUMN attempts integer NOT NULL DEFAULT 0, ADD COLUMN retry_at bigint, ADD COLUMN lease_node integer,
	ADD COLUMN lease_expires bigint, ADD COLUMN created_at bigint, ADD COLUMN started_at bigint, ADD COLUMN completed_at bigint,
	ADD COLUMN version text NOT NULL DEFAULT '', ADD COLUMN tl integer NOT NULL DEFAULT 1, ADD COLUMN priority integer,
	ADD COLUMN rate_key text, ADD COLUMN conc_key text, ADD COLUMN rate_tat bigint, ADD COLUMN wait_key text, ADD COLUMN group_key text;`

// floorColsStatements are the no-op floor's statements on the floor's
// table with the engine's run columns (see floorRun): the floor's claim
// order and index, the engine's writes (times in Unix nanoseconds from
// the server's clock).
func floorColsStatements(s string) floorSQL {
	const now = `(extract(epoch FROM clock_timestamp()) * 1e9)::bigint`
	return floorSQL{
		insert: `INSERT INTO ` + s + `.runs (stage, status, payload, id, process, event, created_at)
			SELECT 1, 'idle', p, gen_random_uuid()::text, 'noop', 'cap:noop', ` + now + ` FROM unnest($1::bytea[]) p`,
		claim: `UPDATE ` + s + `.runs r SET status = 'running', epoch = epoch + 1, attempts = attempts + 1, lease_node = 1,
			lease_expires = ` + now + ` + 30000000000, started_at = ` + now + `
		WHERE seq = ANY(ARRAY(SELECT seq FROM ` + s + `.runs WHERE status = 'idle' ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED))
		RETURNING seq, epoch, stage`,
		done: `UPDATE ` + s + `.runs r SET status = 'completed', output = 'null', completed_at = ` + now + `,
			lease_node = NULL, lease_expires = NULL, tl = tl + 2
		FROM unnest($1::bigint[], $2::bigint[]) i(seq, epoch)
		WHERE r.seq = i.seq AND r.epoch = i.epoch AND r.status = 'running'`,
	}
}

// floorCommit runs one batch in one transaction: its claims, one
// statement for the effect starts and one for the completions.
func floorCommit(ctx context.Context, pool *pgxpool.Pool, batch []*floorCmd, w string, q floorSQL) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var sSeq, sEp, dSeq, dEp []int64
	for _, c := range batch { // admissions first: a claim of the same transaction sees them
		if c.insert != nil {
			if _, err := tx.Exec(ctx, q.insert, c.insert); err != nil {
				return err
			}
		}
	}
	for _, c := range batch {
		switch {
		case c.claim > 0:
			rows, err := tx.Query(ctx, q.claim, c.claim)
			if err != nil {
				return err
			}
			for rows.Next() {
				var r fRun
				if err := rows.Scan(&r.seq, &r.epoch, &r.stage); err != nil {
					return err
				}
				c.got = append(c.got, r)
			}
			if err := rows.Err(); err != nil {
				return err
			}
		case c.start != nil:
			sSeq, sEp = append(sSeq, c.start.seq), append(sEp, c.start.epoch)
		case c.done != nil:
			dSeq, dEp = append(dSeq, c.done.seq), append(dEp, c.done.epoch)
		}
	}
	if len(sSeq) > 0 {
		if _, err := tx.Exec(ctx, q.start, sSeq, sEp); err != nil {
			return err
		}
	}
	if len(dSeq) > 0 {
		args := []any{dSeq, dEp}
		if q.workloads {
			args = append(args, w == "effect", w == "chain")
		}
		if _, err := tx.Exec(ctx, q.done, args...); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
