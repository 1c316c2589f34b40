package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// lazyTx is a writer's batch transaction whose BEGIN is not a round trip
// of its own: it is sent in one pipeline with the transaction's first
// statement (pgx's Begin waits for the server's answer to BEGIN before
// anything else is sent). Every statement runs on one connection, inside
// the transaction once begun; a failed BEGIN fails that first statement,
// so nothing runs outside the transaction. It implements the pgx.Tx
// methods the store's statements use (Exec, Query, QueryRow, SendBatch,
// Conn); the others are not called on it and panic.
type lazyTx struct {
	pgx.Tx // nil: the methods not overridden below are never called
	conn   *pgx.Conn
	begun  bool
}

// writerPlan are the planner settings of every writer transaction, sent
// with its BEGIN. A writer's statements touch a few rows each, found by
// key (a batch's runs, effects, ids), so a sequential scan or a hash or
// merge join over a whole table is never their right plan; but the
// planner can pick one from the statistics of a table that grew since
// they were taken (a new table has none), and a prepared statement keeps
// its generic plan for the connection's life: with them, a batch's
// effect records read the whole effects table once it held thousands of
// rows. Bitmap scans are off too: they would read an in-flight partial
// index (runs_inflight) whose entries of finished runs stay until a vacuum.
// The settings only rule those plans out where an index can serve.
// Where no plan avoids a disabled step (a sort of a statement's own few
// rows under a claim's enable_sort off, say), the planner keeps it at a
// penalty cost far above the JIT thresholds, and compiling the statement
// then took 200 ms at each execution (measured on a claim variant): JIT
// is off too. They are sent as one statement rather than five.
var writerPlan = []string{`SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
	set_config('enable_mergejoin', 'off', true), set_config('enable_bitmapscan', 'off', true), set_config('jit', 'off', true)`}

// withBegin returns b with BEGIN (and writerPlan) queued first if the
// transaction has not begun, and how many statements that queued.
func (t *lazyTx) withBegin(b *pgx.Batch) int {
	if t.begun {
		return 0
	}
	t.begun = true
	head := []*pgx.QueuedQuery{{SQL: "BEGIN"}}
	for _, set := range writerPlan {
		head = append(head, &pgx.QueuedQuery{SQL: set})
	}
	b.QueuedQueries = append(head, b.QueuedQueries...)
	return len(head)
}

// SendBatch sends b, after BEGIN if the transaction has not begun; the
// results returned are b's own.
func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	n := t.withBegin(b)
	br := t.conn.SendBatch(ctx, b)
	for range n {
		br.Exec() // BEGIN and settings: an error stays in br and fails every result after it
	}
	return br
}

// Exec runs one statement.
func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begun {
		return t.conn.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs one query.
func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.begun {
		return t.conn.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs a query of one row.
func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return &lazyRow{rows: rows, err: err}
}

// Conn returns the transaction's connection.
func (t *lazyTx) Conn() *pgx.Conn { return t.conn }

// rollback ends a transaction that did not commit; an error leaves the
// connection inside it, and the pool then closes the connection.
func (t *lazyTx) rollback() {
	if t.begun {
		t.conn.Exec(context.Background(), "ROLLBACK")
	}
}

// batchRows are the rows of a query sent with BEGIN: closing them reads
// the rest of the pipeline.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

// Next implements pgx.Rows: past the last row it closes the rows.
func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// Close implements pgx.Rows: it also reads the rest of the pipeline.
func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

// Err implements pgx.Rows: the rows' error, else the pipeline's.
func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// lazyRow is QueryRow's row: pgx.ErrNoRows when the query returns none.
type lazyRow struct {
	rows pgx.Rows
	err  error
}

// Scan implements pgx.Row: the first row into dest, pgx.ErrNoRows if none.
func (r *lazyRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
