package openstack

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// TestProbeTakeoverWindowCoversAHeldCreate: the window after a takeover
// must cover every create the previous leader may have sent, by the
// backend's own rule for a create whose answer was lost (it may land up
// to lostCreateWindow after the client gave up, requestTimeout after it
// was sent). With the real defaults (--leader-elect-lease-duration 15 s,
// the fence's margin a tenth of it), the previous leader's mutation gate
// passes a create up to 13.5 s after its last renewal was sent, and the
// new leader takes the Lease over no earlier than 15 s after it: the
// create may have been sent 1.5 s before the takeover, while its answer
// was still 28.5 s away. A create held as the chaos judge's os-hang holds
// it (it lands 5 s after the client's timeout) lands 33.5 s after the
// takeover: this test stands at that moment, with the previous leader's
// create held, and asks the new leader (which never saw the create) for
// the Service's load balancer and to delete it. (Upstream's elector gives
// up about 12 s after the last renewal, retry period plus renew deadline,
// and the CCM exits: a create sent then is 3 s before the takeover and
// lands 32 s after it, past the window all the same. A leader paused right
// after a renewal sent its last create about 13 s before the takeover:
// the window covers a hold of 13 + 30 s, not the 60 s from its send that
// lostCreateWindow allows a create of this process's.)
//
// In a process of its own (inOwnProcess), beside the other tests: the
// takeover clock it sets is the process's.
func TestProbeTakeoverWindowCoversAHeldCreate(t *testing.T) {
	if !haveRealOctavia() {
		realOctavia(t) // skips, or fails under CI
	}
	if inOwnProcess(t) {
		return
	}
	const (
		leaseDuration = 15 * time.Second   // upstream's --leader-elect-lease-duration default
		margin        = leaseDuration / 10 // pkg/fence's default margin
		osHang        = 5 * time.Second    // the judge's os-hang: lands 5 s after the client's timeout
	)
	c, late, svc := newLateConformance(t)
	ctx := context.Background()
	nodes := []*corev1.Node{newNode("vm-a", withInternalIP("10.0.0.11"))}
	late.mu.Lock()
	late.hold = 1
	late.mu.Unlock()
	if _, err := c.cloud.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes); !errors.Is(err, errHeld) {
		t.Fatalf("EnsureLoadBalancer with its create held: %v, want the held call's error", err)
	}
	// The new leader is another process: it knows nothing of the create.
	lostCreates.Delete(c.cloud.lb.lostKey(svc))
	// Sent at s = takeover - margin; lands at s + requestTimeout + osHang,
	// which is now.
	tookOver := time.Now().Add(-(requestTimeout + osHang - margin))
	old := cloudapi.SetTakeover(func() time.Time { return tookOver })
	t.Cleanup(func() { cloudapi.SetTakeover(old) })
	mayLandUntil := tookOver.Add(-margin).Add(requestTimeout + lostCreateWindow)

	_, exists, getErr := c.cloud.lb.GetLoadBalancer(ctx, "kubernetes", svc.DeepCopy())
	delErr := c.cloud.lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc.DeepCopy())
	late.release(t)
	if lbs, _ := c.parts(t, svc); lbs == 0 {
		t.Fatalf("the held create did not make a load balancer")
	}
	if getErr != nil || !exists {
		t.Errorf("GetLoadBalancer %s after a takeover, nothing found yet, the previous leader's create sent %s before it may land until %s (in %s): exists=%v, %v; want exists (upstream skips the delete)",
			requestTimeout+osHang-margin, margin, mayLandUntil.Format(time.RFC3339), time.Until(mayLandUntil).Round(time.Second), exists, getErr)
	}
	if delErr == nil {
		t.Errorf("EnsureLoadBalancerDeleted %s after a takeover reported nothing left; the previous leader's create landed right after (as it may until %s): a load balancer nobody deletes (the finalizer is gone)",
			requestTimeout+osHang-margin, mayLandUntil.Format(time.RFC3339))
	}
}
