package openstack

// Session 70's review probe of newPauses (helpers_test.go), the pauses of
// the converge loops: for each first pause the tests use (1 ms in the
// fakes, 300 ms against the stack, NewLoadBalancer's 2 s) the pauses
// start at first, never shrink, grow by half at most, and end at
// min(8×first, 2 s); a zero first stays zero (a loop that asks at once, as
// time.Sleep(0) did before).

import (
	"testing"
	"time"
)

func TestReview70NewPauses(t *testing.T) {
	for _, first := range []time.Duration{time.Millisecond, 300 * time.Millisecond, 2 * time.Second} {
		pause := newPauses(first)
		limit := min(8*first, 2*time.Second)
		prev, total := time.Duration(0), time.Duration(0)
		var seq []time.Duration
		for i := 0; i < 40; i++ {
			d := pause()
			seq = append(seq, d)
			total += d
			switch {
			case i == 0 && d != first:
				t.Errorf("first %v: first pause %v", first, d)
			case d < prev || d > limit || (i > 0 && d > prev*3/2):
				t.Errorf("first %v: pause %d is %v after %v (limit %v)", first, i, d, prev, limit)
			}
			prev = d
		}
		if prev != limit {
			t.Errorf("first %v: pauses end at %v, want %v: %v", first, prev, limit, seq)
		}
		// 180 s deadline loops: a call at least every 2 s.
		t.Logf("first %v: %v ...; 40 pauses %v", first, seq[:8], total)
	}
	pause := newPauses(0)
	for i := 0; i < 5; i++ {
		if d := pause(); d != 0 {
			t.Errorf("first 0: pause %v", d)
		}
	}
}
