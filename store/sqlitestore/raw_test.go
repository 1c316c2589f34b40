package sqlitestore

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"testing"

	"github.com/yella-go/yella/store"
)

// TestAssign: a value the driver read is stored as database/sql's
// Rows.Scan would store it, and a value that does not fit is an error,
// never a silent zero.
func TestAssign(t *testing.T) {
	var (
		i64    int64
		i      int
		b      bool
		s      string
		bs     []byte
		ns     sql.NullString
		ni     sql.NullInt64
		status store.Status
		a      any
	)
	tests := []struct {
		dest any
		src  driver.Value
		want string // fmt.Sprint of *dest; "error" for an error
	}{
		{&i64, int64(-7), "-7"},
		{&i64, nil, "error"},
		{&i64, "7", "error"},
		{&i, int64(42), "42"},
		{&b, int64(1), "true"},
		{&b, int64(0), "false"},
		{&b, int64(2), "error"},
		{&s, "text", "text"},
		{&s, []byte("bytes"), "bytes"},
		{&s, int64(12), "12"},
		{&s, nil, "error"},
		{&bs, []byte(`{"a":1}`), `[123 34 97 34 58 49 125]`},
		{&bs, "x", "[120]"},
		{&bs, nil, "[]"},
		{&ns, "k", "{k true}"},
		{&ns, nil, "{ false}"},
		{&ni, int64(5), "{5 true}"},
		{&status, "running", "running"},
		{&status, int64(1), "error"},
		{&a, int64(3), "3"},
	}
	for _, tc := range tests {
		err := assign(tc.dest, tc.src)
		got := "error"
		if err == nil {
			got = fmt.Sprint(deref(tc.dest))
		}
		if got != tc.want {
			t.Errorf("assign(%T, %#v) = %s (err %v), want %s", tc.dest, tc.src, got, err, tc.want)
		}
	}
}

func deref(p any) any {
	switch x := p.(type) {
	case *int64:
		return *x
	case *int:
		return *x
	case *bool:
		return *x
	case *string:
		return *x
	case *[]byte:
		return *x
	case *sql.NullString:
		return *x
	case *sql.NullInt64:
		return *x
	case *store.Status:
		return *x
	case *any:
		return *x
	}
	return p
}

// TestDriverValue: bound values reach the driver as database/sql would
// convert them.
func TestDriverValue(t *testing.T) {
	type code string
	tests := []struct {
		in   any
		want driver.Value
	}{
		{nil, nil}, {int64(1), int64(1)}, {7, int64(7)}, {"s", "s"}, {true, true},
		{code("c"), "c"}, {store.StatusIdle, "idle"},
	}
	for _, tc := range tests {
		got, err := driverValue(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("driverValue(%#v) = %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
	if _, err := driverValue(struct{}{}); err == nil {
		t.Error("a struct was bound")
	}
}
