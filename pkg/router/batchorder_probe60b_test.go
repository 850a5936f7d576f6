package router

import (
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// TestProbe60bRetargetThenAddressChangeInOneBatch (review s60b, batch
// order): the reverse of TestProbe60ReloadJoinsPendingAddressBatch: a
// reload turning targetOtherCCMsNodes on puts web in the batch (from
// set), then n1's address changes before the flush: the plain key wins
// and one update hands both changes. Expected to pass.
func TestProbe60bRetargetThenAddressChangeInOneBatch(t *testing.T) {
	c, a, web, n1, reload := batchFixture(t)
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
