package openstack

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestCrashAtEveryStep interrupts one create, then one delete, at every
// mutating step in turn, on the real Octavia: each Ensure (Delete) call
// makes at most one change, so the crash is injected into the call that
// makes the next change, as many times as there are steps. A crash either
// never reaches OpenStack or loses only the response (the step was made,
// the backend does not know). After every crash GetLoadBalancer must see
// whatever is left; the create must end with exactly one load balancer and
// exactly its parts (no second listener, floating IP, ...), and the delete
// with nothing.
func TestCrashAtEveryStep(t *testing.T) {
	t.Parallel()
	if !haveRealOctavia() {
		realOctavia(t) // skips, or fails under CI
	}
	for _, lose := range []bool{false, true} {
		name := "request never sent"
		if lose {
			name = "response lost"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // Each has its own backend, fault transport and Service.
			c := newConformance(t, true)
			svc := newService("crash-" + randomID(t))
			nodes := []*corev1.Node{newNode("vm-a", withInternalIP("10.0.0.11")), newNode("bm-1", withInternalIP("192.168.7.21"))}
			ensure := func(ctx context.Context) error {
				_, err := c.cloud.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes)
				return err
			}
			del := func(ctx context.Context) error {
				return c.cloud.lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc.DeepCopy())
			}
			// 1 load balancer, 1 listener, 1 pool, 2 members, 1 monitor, 1 floating IP.
			crashes := c.crashEveryStep(t, svc, ensure, lose)
			if lbs, parts := c.parts(t, svc); lbs != 1 || parts != 7 {
				t.Fatalf("after a create crashed at each of its steps: %d load balancers and %d parts, want 1 and 7", lbs, parts)
			}
			if crashes < 6 {
				t.Errorf("the create crashed %d times, want once per step (6)", crashes)
			}
			deleteCrashes := c.crashEveryStep(t, svc, del, lose)
			t.Logf("the create crashed %d times, the delete %d times", crashes, deleteCrashes)
			if deleteCrashes < 2 {
				t.Errorf("the delete crashed %d times, want once per step (2: the floating IP, the load balancer)", deleteCrashes)
			}
			if lbs, parts := c.parts(t, svc); lbs != 0 || parts != 0 {
				t.Fatalf("after a delete crashed at each of its steps: %d load balancers and %d parts left, want none", lbs, parts)
			}
			if _, exists, err := c.cloud.lb.GetLoadBalancer(context.Background(), "kubernetes", svc); err != nil || exists {
				t.Errorf("GetLoadBalancer after the delete: exists=%v, %v", exists, err)
			}
		})
	}
}

// crashEveryStep calls op until it returns nil, crashing every mutating
// call once: a crash that never reached OpenStack is followed by a call
// allowed one mutating call (the step is made, and the next one in the same
// call crashes). It returns the number of crashes.
func (c *conformance) crashEveryStep(t *testing.T, svc *corev1.Service, op func(context.Context) error, lose bool) int {
	t.Helper()
	ctx := context.Background()
	crashes, allow := 0, 0
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(c.cloud.lb.retryDelay) {
		restore := c.fault.failAfter(allow, lose)
		err := op(ctx)
		restore()
		allow = 0
		switch {
		case err == nil:
			return crashes
		case errors.Is(err, errInjected):
			crashes++
			c.checkSeen(t, svc, fmt.Sprintf("after crash %d", crashes))
			if !lose {
				allow = 1
			}
		case !isRetry(err) && !sqliteLocked(err):
			t.Fatalf("after %d crashes: %v", crashes, err)
		}
	}
	t.Fatalf("still not done after %d crashes", crashes)
	return 0
}

// checkSeen fails the test when OpenStack holds parts of the Service's
// load balancer that GetLoadBalancer does not report. It asks
// GetLoadBalancer first: a load balancer may finish its delete between the
// two reads, but no part appears by itself.
func (c *conformance) checkSeen(t *testing.T, svc *corev1.Service, when string) {
	t.Helper()
	_, exists, err := c.cloud.lb.GetLoadBalancer(context.Background(), "kubernetes", svc)
	if err != nil {
		t.Fatalf("%s: GetLoadBalancer: %v", when, err)
	}
	if lbs, parts := c.parts(t, svc); parts > 0 && !exists {
		t.Fatalf("%s: OpenStack holds %d load balancers and %d parts, but GetLoadBalancer reports none: the delete would be skipped and they would leak", when, lbs, parts)
	}
}
