package yella

import (
	"testing"
	"time"
)

// TestClaimBackoffDoublesPerRound: the claims that fail together wait the
// same time; the wait doubles only for a failure after the current wait has
// passed, up to the cap, and a success resets it.
func TestClaimBackoffDoublesPerRound(t *testing.T) {
	e := &Engine{}
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 50 { // fifty slots fail at once
		if got := e.nextBackoff(t0.Add(time.Duration(i) * time.Millisecond)); got != time.Second {
			t.Fatalf("failure %d of the first round: wait %v, want 1s", i, got)
		}
	}
	now := t0.Add(time.Second) // the first round's retries fail again
	want := 2 * time.Second
	for round := 2; round < 10; round++ {
		for i := range 50 {
			if got := e.nextBackoff(now.Add(time.Duration(i) * time.Millisecond)); got != want {
				t.Fatalf("round %d, failure %d: wait %v, want %v", round, i, got, want)
			}
		}
		now = now.Add(want)
		want = min(2*want, 30*time.Second)
	}
	e.resetBackoff()
	if got := e.nextBackoff(now); got != time.Second {
		t.Fatalf("after a success: wait %v, want 1s", got)
	}
}
