package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The program's endings on a real SQLite file: approved by its own
// signal, expired after the reminder, and an approval sent before the
// order's wait (kept for it); each request and reminder sent once.
func TestApproval(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-order", "A", "-remind", "1s", "-deadline", "2s", "-approve-after", "200ms"},
			[]string{"approval requested for order A (1250 €)", "order A approved by a manager", ": completed, \"approved\""}},
		{[]string{"-order", "B", "-remind", "300ms", "-deadline", "600ms"},
			[]string{"approval requested for order B", "reminder: order B still waits", "order B: no decision within 600ms, expired", "\"expired\""}},
		{[]string{"-approve", "C"}, []string{"no run waits for order C yet: the approval is kept"}},
		{[]string{"-order", "C", "-remind", "1h", "-deadline", "2h"}, []string{"order C approved by the command line"}},
		{[]string{"-order", "A", "-remind", "1s", "-deadline", "2s"}, []string{": completed, \"approved\""}}, // the same order again: its run
	} {
		var out strings.Builder
		if err := run(append([]string{"-db", db}, c.args...), &out); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output %q lacks %q", c.args, out.String(), w)
			}
		}
		if strings.Count(out.String(), "approval requested") > 1 || strings.Count(out.String(), "reminder:") > 1 {
			t.Errorf("%v: a request or reminder sent twice: %q", c.args, out.String())
		}
		if c.args[1] == "A" && len(c.want) == 1 && strings.Contains(out.String(), "requested") {
			t.Errorf("the order placed again requested its approval again: %q", out.String())
		}
	}
	if err := run([]string{"-db", db, "-remind", "2s", "-deadline", "1s"}, &strings.Builder{}); err == nil {
		t.Fatal("a deadline before the reminder was accepted")
	}
}
