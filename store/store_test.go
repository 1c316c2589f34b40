package store

import (
	"slices"
	"testing"
)

func TestUniqueStatuses(t *testing.T) {
	long := slices.Repeat([]Status{StatusErrored, StatusDead}, 20)
	for _, c := range []struct {
		in, want []Status
	}{
		{nil, nil},
		{[]Status{StatusIdle}, []Status{StatusIdle}},
		{[]Status{StatusCompleted, StatusCompleted, StatusCompleted}, []Status{StatusCompleted}},
		{[]Status{StatusDead, StatusIdle, StatusDead, StatusErrored, StatusIdle}, []Status{StatusDead, StatusIdle, StatusErrored}},
		{long, []Status{StatusErrored, StatusDead}},
		{append(slices.Clone(Statuses), Statuses...), nil}, // every status: no filter
		{[]Status{"nope", "nope", StatusIdle}, []Status{"nope", StatusIdle}},
	} {
		if got := UniqueStatuses(c.in); !slices.Equal(got, c.want) {
			t.Errorf("UniqueStatuses(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
