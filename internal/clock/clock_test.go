package clock

import (
	"testing"
	"time"
)

func TestFakeRunsCallbacksInOrder(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	var got []int
	c.AfterFunc(3*time.Second, func() { got = append(got, 3) })
	c.AfterFunc(time.Second, func() {
		got = append(got, 1)
		c.AfterFunc(time.Second, func() { got = append(got, 2) }) // due within the same Advance
	})
	stop := c.AfterFunc(2500*time.Millisecond, func() { got = append(got, 99) })
	if !stop() || stop() {
		t.Fatal("stop should report true once")
	}
	c.Advance(3 * time.Second)
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("order %v", got)
	}
	if !c.Now().Equal(time.Unix(3, 0)) {
		t.Fatalf("now %v", c.Now())
	}
	if c.Pending() != 0 {
		t.Fatalf("pending %d", c.Pending())
	}
}

func TestFakeWaitForTimers(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	go func() { time.Sleep(5 * time.Millisecond); c.AfterFunc(time.Second, func() {}) }()
	if !c.WaitForTimers(1, time.Second) {
		t.Fatal("timer not seen")
	}
	if c.WaitForTimers(2, 10*time.Millisecond) {
		t.Fatal("saw a timer that does not exist")
	}
}
