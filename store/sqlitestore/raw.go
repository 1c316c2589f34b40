package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
)

// The writer's merged statements (many.go) and its other writes (exec)
// run on its driver connection itself (sql.Conn.Raw), not through
// database/sql: they are most of its work, and database/sql costs each of them a lock per call, a conversion
// of every bound value into a new slice, and a second copy of every blob
// it reads (the driver hands over a fresh copy of each, which database/sql
// copies again so that a driver could reuse its buffer). Here the bound
// values go to the driver from a slice the writer reuses, and each row is
// read into values the writer reuses, then into the caller's variables as
// database/sql would convert them (valueRow.Scan).

// driverValue converts a bound argument as database/sql does before it
// hands it to the driver.
func driverValue(v any) (driver.Value, error) {
	switch x := v.(type) {
	case nil, int64, string, []byte, float64, bool:
		return x, nil
	case int:
		return int64(x), nil
	}
	return driver.DefaultParameterConverter.ConvertValue(v)
}

// bind sets the writer's reused bound values (Store.nv) to rows, in order,
// then NULLs up to n values in all.
func (s *Store) bind(rows [][]any, n int) ([]driver.NamedValue, error) {
	nv := s.nv[:0]
	for _, r := range rows {
		var err error
		if nv, err = appendValues(nv, r); err != nil {
			return nil, err
		}
	}
	for len(nv) < n {
		nv = append(nv, driver.NamedValue{Ordinal: len(nv) + 1})
	}
	s.nv = nv
	return nv, nil
}

// appendValues appends args to nv as driver values.
func appendValues(nv []driver.NamedValue, args []any) ([]driver.NamedValue, error) {
	for _, v := range args {
		dv, err := driverValue(v)
		if err != nil {
			clear(nv)
			return nil, fmt.Errorf("argument %d: %w", len(nv)+1, err)
		}
		nv = append(nv, driver.NamedValue{Ordinal: len(nv) + 1, Value: dv})
	}
	return nv, nil
}

// exec runs st, one of the writer's statements (Store.prepare), with args
// on the writer's driver connection, where st's text is prepared again on
// first use (Store.raw).
func (s *Store) exec(ctx context.Context, st *sql.Stmt, args ...any) (driver.Result, error) {
	var res driver.Result
	err := s.conn.Raw(func(dc any) error {
		ds := s.raw[st]
		if ds == nil {
			q, ok := s.sqlOf[st]
			if !ok {
				return errors.New("sqlitestore: a statement not prepared on the writer's connection")
			}
			var err error
			if ds, err = prepareOn(ctx, dc, q); err != nil {
				return err
			}
			s.raw[st] = ds
		}
		nv, err := appendValues(s.nv[:0], args)
		if err != nil {
			return err
		}
		s.nv = nv
		defer s.unbind()
		res, err = execOn(ctx, ds, nv)
		return err
	})
	return res, err
}

// prepareOn prepares q on the driver connection dc.
func prepareOn(ctx context.Context, dc any, q string) (driver.Stmt, error) {
	pc, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, fmt.Errorf("sqlitestore: the driver connection %T cannot prepare with a context", dc)
	}
	return pc.PrepareContext(ctx, q)
}

// execOn runs st, a statement prepared on the driver connection, with nv.
func execOn(ctx context.Context, st driver.Stmt, nv []driver.NamedValue) (driver.Result, error) {
	sx, ok := st.(driver.StmtExecContext)
	if !ok {
		return nil, fmt.Errorf("sqlitestore: the driver statement %T cannot execute with a context", st)
	}
	return sx.ExecContext(ctx, nv)
}

// unbind drops the bound values, so that the reused slice does not keep
// payloads and outputs alive past their statement.
func (s *Store) unbind() { clear(s.nv) }

// valueRow is one row of a statement run on the driver connection, in the
// values the driver read it into; only the writer uses it.
type valueRow struct{ vals []driver.Value }

// each hands every row of rs to scan, then closes rs.
func (v *valueRow) each(rs driver.Rows, scan func(scanner) error) (err error) {
	defer func() {
		if cerr := rs.Close(); err == nil {
			err = cerr
		}
		clear(v.vals) // no row's blobs kept past the statement
	}()
	n := len(rs.Columns())
	if cap(v.vals) < n {
		v.vals = make([]driver.Value, n)
	}
	v.vals = v.vals[:n]
	for {
		if err := rs.Next(v.vals); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := scan(v); err != nil {
			return err
		}
	}
}

// Scan stores the row's values in dest, converted as database/sql's
// Rows.Scan converts them, except that a blob is not copied again: the
// driver already read it into memory of its own.
func (v *valueRow) Scan(dest ...any) error {
	if len(dest) != len(v.vals) {
		return fmt.Errorf("sqlitestore: %d destinations for %d columns", len(dest), len(v.vals))
	}
	for i, d := range dest {
		if err := assign(d, v.vals[i]); err != nil {
			return fmt.Errorf("sqlitestore: column %d: %w", i, err)
		}
	}
	return nil
}

// assign stores src, a value the driver read, in dest.
func assign(dest any, src driver.Value) error {
	switch d := dest.(type) {
	case *int64:
		if x, ok := src.(int64); ok {
			*d = x
			return nil
		}
	case *int:
		if x, ok := src.(int64); ok {
			*d = int(x)
			return nil
		}
	case *bool:
		if x, ok := src.(int64); ok && (x == 0 || x == 1) {
			*d = x == 1
			return nil
		}
	case *string:
		switch x := src.(type) {
		case string:
			*d = x
			return nil
		case []byte:
			*d = string(x)
			return nil
		case int64:
			*d = strconv.FormatInt(x, 10)
			return nil
		}
	case *[]byte:
		switch x := src.(type) {
		case nil:
			*d = nil
			return nil
		case []byte:
			*d = x
			return nil
		case string:
			*d = []byte(x)
			return nil
		}
	case sql.Scanner:
		return d.Scan(src)
	case *any:
		*d = src
		return nil
	default:
		// A named string or integer type.
		rv := reflect.ValueOf(dest)
		if rv.Kind() == reflect.Pointer && !rv.IsNil() {
			e := rv.Elem()
			switch x := src.(type) {
			case string:
				if e.Kind() == reflect.String {
					e.SetString(x)
					return nil
				}
			case int64:
				switch e.Kind() {
				case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
					if !e.OverflowInt(x) {
						e.SetInt(x)
						return nil
					}
				}
			}
		}
	}
	return fmt.Errorf("cannot store %T (%v) in %T", src, src, dest)
}
