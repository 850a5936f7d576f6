package router

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// TestProbe60bRetargetThenAddressChangeInOneBatch (review s60b, batch
// order): the reverse of TestProbe60ReloadJoinsPendingAddressBatch: a
// reload turning targetOtherCCMsNodes on puts web in the batch (from
// set), then n1's address changes before the flush: the plain key wins
// and one update hands both changes. Expected to pass.
func TestProbe60bRetargetThenAddressChangeInOneBatch(t *testing.T) {
	quiet, maxWait := process.AddressBatchQuiet, process.AddressBatchMax
	process.AddressBatchQuiet, process.AddressBatchMax = 2*time.Second, time.Minute
	t.Cleanup(func() { process.AddressBatchQuiet, process.AddressBatchMax = quiet, maxWait })
	c, a, _, reload := reloadFixture(t)
	web := c.service(t, "web")
	n1 := c.createNode(t, newNode("n1", func(n *corev1.Node) { n.Status.Addresses = []corev1.NodeAddress{internalIP("10.0.0.1")} }))
	c.createNode(t, newNode("hc-1", withPlatformAnnotation("hcloud"), func(n *corev1.Node) {
		n.Status.Addresses = []corev1.NodeAddress{internalIP("10.0.9.1")}
	}))
	eventually(t, "n1 targeted in a", func() bool { return a.targetsOf(web) == "n1=10.0.0.1" })
	settleResync(t, c)
	before := a.count(&a.updates)

	start := time.Now()
	reload("defaultBackend: a, targetOtherCCMsNodes: true", false)
	c.setAddresses(t, n1, internalIP("10.0.0.2"))
	if waited := time.Since(start); waited >= process.AddressBatchQuiet {
		t.Skipf("took %v, longer than the batch's quiet period", waited)
	}
	eventually(t, "hc-1 and n1's new address in a", func() bool { return a.targetsOf(web) == "hc-1=10.0.9.1,n1=10.0.0.2" })
	time.Sleep(time.Until(start.Add(process.AddressBatchQuiet + time.Second)))
	settleResync(t, c)
	if got := a.count(&a.updates) - before; got != 1 {
		t.Errorf("a updated web %d times for a reload and an address change arriving together, want 1", got)
	}
}
