package router

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// startTwoBackendWeb starts web served by a and b (annotation "a,b")
// with n1 at 10.0.0.1 targeted in both.
func startTwoBackendWeb(t *testing.T) (c *reloadCluster, a, b *heldState, web *corev1.Service, n1 *corev1.Node) {
	t.Helper()
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a, b = heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
	a.reset()
	b.reset()
	bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}}
	c = startReloadCluster(t, heldConfig(t, "defaultBackend: a", bs...), newService("web", withLBBackend("a,b")))
	c.runServiceController(t)
	n1 = c.createNode(t, newNode("n1", func(n *corev1.Node) { n.Status.Addresses = []corev1.NodeAddress{internalIP("10.0.0.1")} }))
	eventually(t, "web in a and b targeting n1", func() bool {
		w := c.service(t, "web")
		return a.targetsOf(w) == "n1=10.0.0.1" && b.targetsOf(w) == "n1=10.0.0.1"
	})
	settleResync(t, c)
	return c, a, b, c.service(t, "web"), n1
}

// TestProbe60bPartialSuccessRestartsTheFailingBackendsBackoff (review
// s60b of d805db7, only keys): a and b are both down; n1's address
// changes and web's re-sync fails in both, retried as a whole with the
// queue's exponential backoff (5 ms doubling). After about ten failures
// the retries are more than a second apart. Then a comes back: the next
// retry updates a and fails in b, and partialFailure queues a new key
// (only=b) with AddRateLimited: a key the rate limiter has never seen,
// so b's backoff restarts at 5 ms, and the backend that has been down
// all along is called several more times in the next second (5 here; for
// each Service in it: with 5,000 Services, every one restarts its
// backoff the moment the other backend answers). An operator expects a
// backend that keeps failing to keep its backoff. Fix idea: carry the
// key's requeue count into the only key (NumRequeues: AddAfter with the
// delay the limiter would give the original key), or keep the plain key
// and remember the backends still owed.
func TestProbe60bPartialSuccessRestartsTheFailingBackendsBackoff(t *testing.T) {
	c, a, b, web, n1 := startTwoBackendWeb(t)
	a.setFail(errHeldDown, nil)
	b.setFail(errHeldDown, nil)
	c.setAddresses(t, n1, internalIP("10.0.0.2"))
	eventually(t, "ten failed re-syncs in b", func() bool { return b.count(&b.updateFails) >= 10 })
	a.setFail(nil, nil)
	eventually(t, "a updated", func() bool { return a.targetsOf(web) == "n1=10.0.0.2" })
	before := b.count(&b.updateFails)
	time.Sleep(1200 * time.Millisecond)
	got := b.count(&b.updateFails) - before
	b.setFail(nil, nil)
	if got > 1 {
		t.Errorf("b, down all along, was called %d more times in the 1.2 s after a answered (its backoff was above 2.5 s): the only=b key restarted its backoff at 5 ms", got)
	}
	eventually(t, "b updated once it answers", func() bool { return b.targetsOf(web) == "n1=10.0.0.2" })
}

// TestProbe60bPlainKeyWhileOnlyKeyWaitsUpdatesEveryBackend (review s60b,
// only keys x address change): b is down; n1's address changes, a is
// updated and b's only key waits for its retry. n1's address changes
// again: the plain key must update a with the new address (not only b),
// and once b answers both hold the last address. Expected to pass.
func TestProbe60bPlainKeyWhileOnlyKeyWaitsUpdatesEveryBackend(t *testing.T) {
	c, a, b, web, n1 := startTwoBackendWeb(t)
	b.setFail(errHeldDown, nil)
	n1 = c.setAddresses(t, n1, internalIP("10.0.0.2"))
	eventually(t, "a has 10.0.0.2, b failing", func() bool {
		return a.targetsOf(web) == "n1=10.0.0.2" && b.count(&b.updateFails) >= 3
	})
	c.setAddresses(t, n1, internalIP("10.0.0.3"))
	eventually(t, "a has 10.0.0.3 while b still fails", func() bool { return a.targetsOf(web) == "n1=10.0.0.3" })
	b.setFail(nil, nil)
	eventually(t, "b has 10.0.0.3 once it answers", func() bool { return b.targetsOf(web) == "n1=10.0.0.3" })
	settleResync(t, c)
	if got := a.targetsOf(web); got != "n1=10.0.0.3" {
		t.Errorf("a's targets = %q, want n1=10.0.0.3", got)
	}
}
