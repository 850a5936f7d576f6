package lbcontroller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestChangeNotQueuedBehindThePass: a drift-repair pass over Services
// whose every sync the cloud slows (its budget: in the AWS 5,000-NLB
// scale cells a pass checks about 1,200 NLBs a period) must not make a
// change wait for the pass. The first Service the pass checks is edited
// while it is checked; queued again, its sync must come before the
// pass's last Service is checked. Before, the pass queued all its
// Services at once, and a Service queued again waited behind every one of
// them: in the scale cells, Services the pass re-ensured while the
// churn's nodes were deleted were queued again by the nodes' return, and
// two target groups lacked those nodes until the pass's period ended,
// 565 s after the churn began.
func TestChangeNotQueuedBehindThePass(t *testing.T) {
	e, ma, _ := startKept(t, "203.0.113.91", "203.0.113.92", 10*time.Millisecond, 50*time.Millisecond)
	const n = 12
	var keys []string
	for i := range n {
		s := service(fmt.Sprintf("web-%02d", i), nil)
		s.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "ma", string(annotation.LoadBalancerDrain): "0"}
		e.create(t, s)
		keys = append(keys, "default/"+s.Name)
	}
	for i := range n {
		eventually(t, "addressed", addressed(e, t, fmt.Sprintf("web-%02d", i)))
	}
	eventually(t, "the start-up syncs done", func() error {
		e.ctrl.mu.Lock()
		defer e.ctrl.mu.Unlock()
		if e.ctrl.pass != nil || e.ctrl.queue.Len() > 0 {
			return fmt.Errorf("a pass in progress or syncs queued")
		}
		return nil
	})

	ma.slow(150 * time.Millisecond)
	e.ctrl.startPass(e.ctx, passRepair, keys)
	eventually(t, "the pass's first Service being checked", func() error {
		if !slices.Contains(ma.callLog(), "ensure web-00") {
			return fmt.Errorf("calls %v", ma.callLog())
		}
		return nil
	})
	e.edit(t, "web-00", map[string]*string{"example.com/owner": ptrTo("team-b")})
	// With two workers the pass's first ensure logged may be web-01's: the
	// edit's sync is web-00's second ensure, wherever the first is.
	eventually(t, "web-00 ensured again", func() error {
		if calls := ma.callLog(); len(indexesOf(calls, "ensure web-00")) < 2 {
			return fmt.Errorf("calls %v", calls)
		}
		return nil
	})
	// The pass's check of web-11, its last Service, is the last ensure of
	// web-11 once the pass ended: a start-up event the informer delivered
	// late (a loaded machine, -race) can sync web-11 once more early on, and
	// that one is not the pass's end (a cold CI run's unit stage failed so:
	// calls [ensure web-00 ensure web-01 ensure web-02 ensure web-11 ensure
	// web-03 ensure web-00]).
	eventually(t, "the pass's every Service checked", func() error {
		calls := ma.callLog()
		for _, k := range keys {
			if !slices.Contains(calls, "ensure "+k[len("default/"):]) {
				return fmt.Errorf("calls %v", calls)
			}
		}
		e.ctrl.mu.Lock()
		defer e.ctrl.mu.Unlock()
		if e.ctrl.pass != nil {
			return fmt.Errorf("the pass in progress")
		}
		return nil
	})
	calls := ma.callLog()
	again := indexesOf(calls, "ensure web-00")[1]
	elevens := indexesOf(calls, "ensure web-11")
	if len(elevens) == 0 {
		t.Fatalf("the pass never checked web-11: calls %v", calls)
	}
	if last := elevens[len(elevens)-1]; last < again {
		t.Errorf("web-00's edit was synced after the pass's last Service was checked: calls %v", calls)
	}
}

// indexesOf returns the positions of call in calls, in order.
func indexesOf(calls []string, call string) []int {
	var at []int
	for i, c := range calls {
		if c == call {
			at = append(at, i)
		}
	}
	return at
}
