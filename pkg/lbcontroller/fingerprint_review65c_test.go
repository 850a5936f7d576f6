package lbcontroller

// Review probe (65c) of 8b51025: the aws backend remembers a fingerprint
// of the Service version it last began to reconcile (specFingerprint), and
// a node sync handed a Service with another fingerprint changes only
// targets and records no verified view (specStale). This controller must
// hand the node sync a Service with the fingerprint of the one its Ensure
// was handed: the router's class defaults, the annotations the router
// and the controller write after the Ensure, the status written.

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestReview65cNodeSyncFingerprintMatchesTheEnsure drives the controller
// over the router and the AWS backend, a Service of a class with a default
// annotation (nlb-target-type: ip, injected by the router). After its
// Ensure, the first node sync's verified write is answered
// TargetGroupNotFound, so it takes the whole path (observe): with the
// fingerprint of the Ensure's version it takes the fast path and records
// the verified view; with another one it changes only targets and records
// none. The next node sync then shows which: with the view it reads
// nothing (no DescribeLoadBalancers). Passes when the fingerprints match.
func TestReview65cNodeSyncFingerprintMatchesTheEnsure(t *testing.T) {
	e, f := startAWS(t, envOptions{nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond},
		*utilt.NewService("web", utilt.WithClass(awsIPClass)))
	ctx := context.Background()
	waitFor(t, time.Minute, "web's NLB targeting worker-0", func() error {
		if s := e.get(t, "web"); len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no address yet; events %v", e.events(t, "web"))
		}
		return review64Every(f, 1, "10.0.0.10")
	})
	time.Sleep(300 * time.Millisecond) // the status write's echo synced
	addNode := func(i int) {
		t.Helper()
		n := utilt.NewNode(fmt.Sprintf("worker-%d", i), utilt.WithProviderID(fmt.Sprintf("baremetal://worker-%d", i)), utilt.WithInternalIP(fmt.Sprintf("10.0.0.%d", 10+i)))
		if _, err := e.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.ResetCalls()
	f.FailNext("RegisterTargets", "TargetGroupNotFound")
	addNode(1)
	waitFor(t, time.Minute, "worker-1 registered", func() error {
		return review64Every(f, 1, "10.0.0.10", "10.0.0.11")
	})
	if f.Calls("RegisterTargets") < 2 || f.Calls("DescribeLoadBalancers") == 0 {
		t.Fatalf("setup: the first node sync did not fall back from its verified write: calls %v", f.CallCounts())
	}
	time.Sleep(300 * time.Millisecond)
	f.ResetCalls()
	addNode(2)
	waitFor(t, time.Minute, "worker-2 registered", func() error {
		return review64Every(f, 1, "10.0.0.10", "10.0.0.11", "10.0.0.12")
	})
	if n := f.Calls("DescribeLoadBalancers"); n != 0 {
		t.Errorf("the node sync after a fallback read the NLB again (DescribeLoadBalancers %d, calls %v): the fallback recorded no verified view, "+
			"as a node sync handed another version of the Service than the Ensure's does", n, f.CallCounts())
	}
}
