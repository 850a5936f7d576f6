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
	eventually(t, "web-00 ensured again", func() error {
		if calls := ma.callLog(); len(calls) < 2 || !slices.Contains(calls[1:], "ensure web-00") {
			return fmt.Errorf("calls %v", calls)
		}
		return nil
	})
	calls := ma.callLog()
	again := slices.Index(calls[1:], "ensure web-00") + 1
	if last := slices.Index(calls, "ensure web-11"); last >= 0 && last < again {
		t.Errorf("web-00's edit was synced after the pass's last Service was checked: calls %v", calls)
	}
}
