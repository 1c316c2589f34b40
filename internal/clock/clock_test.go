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

func TestFakeNext(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	if _, ok := c.Next(); ok {
		t.Fatal("next with nothing scheduled")
	}
	var ran []int
	c.AfterFunc(5*time.Second, func() { ran = append(ran, 5) })
	stop := c.AfterFunc(time.Second, func() { ran = append(ran, 1) })
	c.AfterFunc(3*time.Second, func() { ran = append(ran, 3) })
	if next, ok := c.Next(); !ok || !next.Equal(time.Unix(1, 0)) {
		t.Fatalf("next = %v, %v; want 1s", next, ok)
	}
	stop()
	next, _ := c.Next()
	if !next.Equal(time.Unix(3, 0)) {
		t.Fatalf("next after stopping the first = %v, want 3s", next)
	}
	c.Set(next)
	if len(ran) != 1 || ran[0] != 3 {
		t.Fatalf("ran %v, want [3]", ran)
	}
	if next, _ := c.Next(); !next.Equal(time.Unix(5, 0)) {
		t.Fatalf("next = %v, want 5s", next)
	}
}
