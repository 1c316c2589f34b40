package sqlitestore

import (
	"database/sql"
	"math/bits"
	"strings"
)

// A merged statement (the claims of a batch, its attempt ends) takes its
// runs as rows of bound values, a VALUES list joined to runs by id. Bound
// values reach SQLite as they are: no encoding on the way in, no parsing
// in the statement (a JSON argument cost about a fifth of the writer's
// time in the two statements), and a string or an output goes through
// with its exact bytes, whatever they hold.
//
// A statement is compiled for a number of rows, so each kind is prepared
// for the powers of two up to manyMax rows, once each, on first use; the
// rows a statement has beyond its runs' are NULLs, which match no run.
// More than manyMax runs take several statements.

// manyMax is the most rows of one merged statement.
const manyMax = 128

// manyKind is a merged statement: its SQL around the rows, and its values
// per row.
type manyKind int

const (
	claimMany manyKind = iota
	finishMany
	finishManyRest // finishMany returning what the claim did not (Store.claimed)
	completeMany   // finishManyRest for completions (completeRow)
	insertMany     // runs admitted by a batch (flushRuns): never padded
	manyKinds
)

var manyParts = [manyKinds]struct {
	head, tail string
	cols       int
	row        string // one row's values; "": cols parameters
}{
	claimMany:      {claimManyHead, claimManyTail, 4, ""},
	finishMany:     {finishManyHead, finishManyTail, 15, ""},
	finishManyRest: {finishManyHead, finishManyRestTail, 15, ""},
	completeMany:   {completeManyHead, finishManyRestTail, 6, ""},
	insertMany:     {insertRunsHead, "", 16, insertRunsRow},
}

// manySize is the rows of the statement that takes n runs (1 ≤ n ≤
// manyMax): the power of two at or above n.
func manySize(n int) int {
	return 1 << bits.Len(uint(n-1))
}

// manySQL is kind k's statement for n rows of values.
func manySQL(k manyKind, n int) string {
	p := manyParts[k]
	row := p.row
	if row == "" {
		row = "(?" + strings.Repeat(", ?", p.cols-1) + ")"
	}
	return p.head + row + strings.Repeat(", "+row, n-1) + p.tail
}

// manyStmt is the writer's statement of kind k for n rows (a power of two
// up to manyMax), prepared on first use.
func (w *wtx) manyStmt(k manyKind, n int) (*sql.Stmt, error) {
	i := bits.Len(uint(n)) - 1
	if st := w.s.many[k][i]; st != nil {
		return st, nil
	}
	st, err := w.s.conn.PrepareContext(w.ctx, manySQL(k, n))
	if err != nil {
		return nil, err
	}
	w.s.many[k][i] = st
	return st, nil
}

// queryMany runs kind k's statement for rows (each of the kind's values)
// in as few statements as manyMax allows, and hands each row it returns
// to scan.
func (w *wtx) queryMany(k manyKind, rows [][]any, scan func(*sql.Rows) error) error {
	cols := manyParts[k].cols
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), manyMax)]
		rows = rows[len(chunk):]
		n := manySize(len(chunk))
		st, err := w.manyStmt(k, n)
		if err != nil {
			return err
		}
		args := make([]any, 0, n*cols)
		for _, r := range chunk {
			args = append(args, r...)
		}
		args = args[:n*cols] // the padding rows: nil binds NULL
		if err := w.scanAll(st, args, scan); err != nil {
			return err
		}
	}
	return nil
}

// scanAll runs st with args and hands each row to scan.
func (w *wtx) scanAll(st *sql.Stmt, args []any, scan func(*sql.Rows) error) error {
	rs, err := st.QueryContext(w.ctx, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		if err := scan(rs); err != nil {
			return err
		}
	}
	return rs.Err()
}
