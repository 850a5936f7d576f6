package lbcontroller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestTargetNodeLabelChangesRetarget: a Service's NLB targets only the
// nodes carrying service.beta.kubernetes.io/aws-load-balancer-target-node-labels;
// a node gaining that label becomes a target and one losing it leaves, each
// through the controller's node sync, with no other node change and no
// repair pass. Before, a label change started no node sync (only an
// exclusion or a providerID did): the NLB waited for an unrelated change.
// A label no Service selects on updates nothing.
func TestTargetNodeLabelChangesRetarget(t *testing.T) {
	e, f := startAWS(t, envOptions{nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond})
	nodes := e.client.CoreV1().Nodes()
	label := func(name string, set bool, k, v string) {
		t.Helper()
		n, err := nodes.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if set {
			n.Labels[k] = v
		} else {
			delete(n.Labels, k)
		}
		if _, err := nodes.Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	targets := func(want ...string) func() error {
		return func() error {
			if got := ipTargets(f); !slices.Equal(got, want) {
				return fmt.Errorf("IP targets %v, want %v", got, want)
			}
			return nil
		}
	}
	label("worker-0", true, "pool", "web")
	n := utilt.NewNode("worker-1", utilt.WithProviderID("baremetal://worker-1"), utilt.WithInternalIP("10.0.0.11"))
	if _, err := nodes.Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create(t, utilt.NewService("web", utilt.WithClass(awsIPClass),
		utilt.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-target-node-labels", "pool=web")))
	waitFor(t, time.Minute, "the NLB targeting worker-0 alone", func() error {
		if s := e.get(t, "web"); len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no address yet; events %v", e.events(t, "web"))
		}
		return targets("10.0.0.10")()
	})

	label("worker-1", true, "pool", "web")
	waitFor(t, 30*time.Second, "worker-1 registered once labelled", targets("10.0.0.10", "10.0.0.11"))
	updates := e.cloud.updates.Load()
	label("worker-1", true, "unrelated", "x")
	label("worker-1", false, "pool", "")
	waitFor(t, 30*time.Second, "worker-1 deregistered once unlabelled", targets("10.0.0.10"))
	if u := e.cloud.updates.Load() - updates; u != 1 {
		t.Errorf("%d updates after the unrelated label and the removal, want 1", u)
	}
	if evs := e.events(t, "web"); hasEvent(evs, "UpdateLoadBalancerFailed") != "" {
		t.Errorf("events %s", strings.Join(evs, "; "))
	}
}
