package pgstore

import "testing"

// TestArrayRows: the FROM item of parallel arrays unnests each in a
// select list, names each column, gives the position from 1 when asked
// for one more name than arrays, and refuses names that do not match.
func TestArrayRows(t *testing.T) {
	for _, c := range []struct {
		alias, names, arrays, want string
	}{
		{"i", "a", "$1::int[]", "(SELECT unnest($1::int[]) AS a) AS i"},
		{"i", "id, n", "$1::text[],\n\t\t$2::bigint[]", "(SELECT unnest($1::text[]) AS id, unnest($2::bigint[]) AS n) AS i"},
		{"c", "id,\n\t\tn, ord", "$3::text[], $4::bigint[]",
			"(SELECT unnest($3::text[]) AS id, unnest($4::bigint[]) AS n, generate_series(1, cardinality($3::text[])) AS ord) AS c"},
	} {
		if got := arrayRows(c.alias, c.names, c.arrays); got != c.want {
			t.Errorf("arrayRows(%q, %q, %q)\n= %s\nwant %s", c.alias, c.names, c.arrays, got, c.want)
		}
	}
	for _, c := range [][2]string{{"a, b, c", "$1::int[]"}, {"a", "$1::int[], $2::int[]"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("arrayRows with names %q for arrays %q did not panic", c[0], c[1])
				}
			}()
			arrayRows("i", c[0], c[1])
		}()
	}
}
