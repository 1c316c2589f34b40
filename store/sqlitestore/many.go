package sqlitestore

import (
	"database/sql/driver"
	"fmt"
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
	claimMany      manyKind = iota
	claimFreshMany          // claimMany for runs kept as admitted (Store.fresh), by seq
	finishMany
	finishManyHeld // finishMany for runs held from their claims, returning nothing (Store.claimed)
	completeMany   // finishManyHeld for completions (completeRow)
	insertMany     // runs admitted by a batch (flushRuns): never padded
	manyKinds
)

var manyParts = [manyKinds]struct {
	head, tail string
	cols       int
	row        string // one row's values; "": cols parameters
}{
	claimMany:      {claimManyHead, claimManyTail, 4, ""},
	claimFreshMany: {claimFreshManyHead, claimFreshManyTail, 4, ""},
	finishMany:     {finishManyHead, finishManyTail, 15, ""},
	finishManyHeld: {finishManyHead, finishManyHeldTail, 15, ""},
	completeMany:   {completeManyHead, finishManyHeldTail, 6, ""},
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
// up to manyMax), prepared on its driver connection dc on first use.
func (w *wtx) manyStmt(dc any, k manyKind, n int) (driver.Stmt, error) {
	i := bits.Len(uint(n)) - 1
	if st := w.s.many[k][i]; st != nil {
		return st, nil
	}
	st, err := prepareOn(w.ctx, dc, manySQL(k, n))
	if err != nil {
		return nil, err
	}
	w.s.many[k][i] = st
	return st, nil
}

// queryMany runs kind k's statement for rows (each of the kind's values)
// in as few statements as manyMax allows, and hands each row it returns
// to scan; with scan nil it returns the count of rows the statements
// changed.
func (w *wtx) queryMany(k manyKind, rows [][]any, scan func(scanner) error) (int64, error) {
	var changed int64
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), manyMax)]
		rows = rows[len(chunk):]
		n, err := w.runMany(k, manySize(len(chunk)), chunk, scan)
		if err != nil {
			return changed, err
		}
		changed += n
	}
	return changed, nil
}

// runMany runs kind k's statement for n rows on the writer's driver
// connection with rows' values (the padding rows NULLs) and hands each row
// it returns to scan; with scan nil it returns no rows but the count of
// rows it changed.
func (w *wtx) runMany(k manyKind, n int, rows [][]any, scan func(scanner) error) (changed int64, err error) {
	err = w.s.conn.Raw(func(dc any) error {
		st, err := w.manyStmt(dc, k, n)
		if err != nil {
			return err
		}
		nv, err := w.s.bind(rows, n*manyParts[k].cols)
		if err != nil {
			return err
		}
		defer w.s.unbind()
		if scan == nil {
			res, err := execOn(w.ctx, st, nv)
			if err != nil {
				return err
			}
			changed, err = res.RowsAffected()
			return err
		}
		sq, ok := st.(driver.StmtQueryContext)
		if !ok {
			return fmt.Errorf("sqlitestore: the driver statement %T cannot query with a context", st)
		}
		rs, err := sq.QueryContext(w.ctx, nv)
		if err != nil {
			return err
		}
		return w.s.row.each(rs, scan)
	})
	return changed, err
}
