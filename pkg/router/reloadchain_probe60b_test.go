package router

import (
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// TestProbe60bReloadAndBackBeforeFlushLeavesIntermediateTargets (review
// s60b of d805db7, chain of reloads): configuration A (targetOtherCCMsNodes
// off) has web's load balancer in a target n1; hc-1 is another CCM's
// node. A reload to B turns targetOtherCCMsNodes on: Retarget puts web in
// the address batch with from=A. Before the batch flushes, n2 joins and
// upstream's node sync updates web's load balancer under B: hc-1, n1,
// n2. Then a reload back to A turns it off again: Retarget's AddRetarget
// with from=B finds web pending and keeps the key with from=A. At the
// flush the re-sync compares A's targets with A's (the configuration in
// use): "unchanged", so it skips the update, and web's load balancer
// keeps hc-1, which the configuration in use does not target, until some
// node set change. An operator who turned targetOtherCCMsNodes off
// expects hc-1 out of every load balancer. The skip assumes the load
// balancer holds `from`'s targets, which is false once anything updated
// it under an intermediate configuration. Fix idea: when AddRetarget finds
// a pending key with another from, make it a plain key (update every
// backend), or compare with the targets the load balancer was last handed
// (the router records them for the stale-list check) instead of a
// configuration.
func TestProbe60bReloadAndBackBeforeFlushLeavesIntermediateTargets(t *testing.T) {
	quiet, maxWait := process.AddressBatchQuiet, process.AddressBatchMax
	process.AddressBatchQuiet, process.AddressBatchMax = 4*time.Second, time.Minute
	t.Cleanup(func() { process.AddressBatchQuiet, process.AddressBatchMax = quiet, maxWait })
	c, a, _, reload := reloadFixture(t)
	web := c.service(t, "web")
	c.createNode(t, newNode("n1"))
	c.createNode(t, newNode("hc-1", withPlatformAnnotation("hcloud")))
	eventually(t, "n1 alone targeted", func() bool { return a.targetsOf(web) == "n1=" })
	settleResync(t, c)

	start := time.Now()
	reload("defaultBackend: a, targetOtherCCMsNodes: true", false) // A -> B: web pending, from=A
	c.createNode(t, newNode("n2"))
	eventually(t, "upstream's node sync under B: hc-1 joins with n2", func() bool { return a.targetsOf(web) == "hc-1=,n1=,n2=" })
	reload("defaultBackend: a", false) // B -> A
	if waited := time.Since(start); waited >= process.AddressBatchQuiet {
		t.Skipf("the reloads took %v, longer than the batch's quiet period", waited)
	}
	time.Sleep(process.AddressBatchQuiet + time.Second)
	settleResync(t, c)
	if got := a.targetsOf(web); got != "n1=,n2=" {
		t.Errorf("after turning targetOtherCCMsNodes on and off again, web's load balancer targets %q; want n1=,n2= (hc-1 is another CCM's node the configuration in use does not target)", got)
	}
}
