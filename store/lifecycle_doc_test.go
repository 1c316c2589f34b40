package store_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/yella-go/yella/store"
)

// docs/lifecycle.md is generated from the transition table, so the
// documented lifecycle is the one the stores obey. Regenerate it with
// UPDATE_GOLDEN=1 go test ./store.
func TestLifecycleDoc(t *testing.T) {
	got := lifecycleDoc()
	const path = "../docs/lifecycle.md"
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run UPDATE_GOLDEN=1 go test ./store)", err)
	}
	if string(want) != got {
		t.Errorf("%s is stale: run UPDATE_GOLDEN=1 go test ./store", path)
	}
}

func lifecycleDoc() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Run lifecycle\n\n")
	p("<!-- Generated from the transition table (store.Transitions in store/lifecycle.go) by TestLifecycleDoc;\n")
	p("     edit the table, then run UPDATE_GOLDEN=1 go test ./store. -->\n\n")
	p("An emission admits a run **idle**; a claim makes it **running** (its lease epoch and attempt\n")
	p("count go up by one). Every other change of a run is one action of the transition table below,\n")
	p("applied by `Store.Update` in one transaction with everything it carries (follow-up runs,\n")
	p("effect records, a timeline entry). `store.Apply` is the table's reference implementation:\n")
	p("the in-memory store applies it directly, and the SQLite store is checked against it\n")
	p("(`TestConformance/TransitionTable`, run by every store through `storetest.Run`, and `FuzzUpdates`).\n\n")
	p("```mermaid\nstateDiagram-v2\n")
	for _, st := range store.Statuses {
		p("    state \"%s\" as %s\n", st, stateID(st))
	}
	p("    [*] --> idle : admit\n")
	p("    idle --> running : claim\n")
	type edge struct{ from, to store.Status }
	var order []edge
	labels := map[edge][]string{}
	add := func(e edge, label string) {
		if _, ok := labels[e]; !ok {
			order = append(order, e)
		}
		labels[e] = append(labels[e], label)
	}
	for _, r := range store.Transitions {
		for _, from := range r.From {
			for _, to := range r.To {
				add(edge{from, to}, string(r.Action))
			}
			if r.Fallback != "" {
				add(edge{from, r.Fallback}, string(r.Action)+" (no follow-up admitted)")
			}
		}
	}
	for _, e := range order {
		p("    %s --> %s : %s\n", stateID(e.from), stateID(e.to), strings.Join(labels[e], ", "))
	}
	p("```\n\n")

	p("## Statuses\n\n")
	p("| status | raw state | final | left by |\n|---|---|---|---|\n")
	for _, st := range store.Statuses {
		var by []string
		if st == store.StatusIdle {
			by = append(by, "claim")
		}
		for _, r := range store.Transitions {
			for _, from := range r.From {
				if from == st {
					by = append(by, string(r.Action))
				}
			}
		}
		final := "no"
		if !st.Active() {
			final = "yes"
		}
		p("| %s | %s | %s | %s |\n", st, st.State(), final, orNone(strings.Join(by, ", ")))
	}

	p("\n## Actions\n\n")
	p("Every action clears the lease, stores the handler version when the update carries one,\n")
	p("sets the completion time when the new status is final and clears it when it is idle, and\n")
	p("appends one timeline entry with the note shown (the update may give its own).\n")
	p("Guards: **epoch**: the run is running at the update's lease epoch, else `ErrFenced`;\n")
	p("**reclaim**: that, and its lease expired or its owner is known to be gone, else `ErrFenced`;\n")
	p("**status**: the run's status is one of *from*, else a `*StatusError`.\n\n")
	p("| action | actor | guard | from | to | output | follow-up event | error | retry time | attempts | effects | follow-up runs | note | what it is for |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range store.Transitions {
		attempts := "kept"
		if r.ResetAttempts {
			attempts = "reset to 0"
		}
		effects := map[store.EffectWrite]string{store.EffectsKept: "kept", store.EffectsClearStarted: "started ones deleted",
			store.EffectsComplete: "the given one completed"}[r.Effects]
		followUp := "none"
		switch {
		case r.FollowUp && r.Fallback != "":
			followUp = fmt.Sprintf("admitted with it; if none is admitted: %s (note %q)", r.Fallback, r.FallbackNote)
		case r.FollowUp:
			followUp = "admitted with it; if none is admitted: refused (`ErrNotAdmitted`)"
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Action, r.Actor, r.Guard, statuses(r.From), statuses(r.To), r.Output, r.Then, r.Error, r.RetryAt,
			attempts, effects, followUp, r.Note, r.Doc)
	}
	return b.String()
}

func stateID(st store.Status) string { return strings.ReplaceAll(string(st), "-", "_") }

func statuses(ss []store.Status) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "(none: final)"
	}
	return s
}
