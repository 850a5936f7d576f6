package aws

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestLifecycleKeepsNodesThroughRefusalsAndThrottling drives upstream's
// cloud-node-lifecycle controller (every 100 ms) against the backend while
// EC2 refuses the credentials (401 AuthFailure), then while it throttles
// every call (RequestLimitExceeded past the SDK's retries): the controller
// deletes a Node at once on InstanceExists (false, nil), so neither may
// read as "gone" (DESIGN.md §3.1). Each phase lasts until the fake has
// refused or throttled several lookups. Then EC2 answers again and the
// instance really gone is reported gone: its Node is deleted, the other
// kept, so the test can fail.
func TestLifecycleKeepsNodesThroughRefusalsAndThrottling(t *testing.T) {
	e := newEnv(t, fastCache)
	notReady := func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	}
	in1, in2 := e.addInstance(1), e.addInstance(2)
	n1 := newNode("n1", testutil.WithProviderID(providerID(in1.Zone, in1.ID)), notReady)
	n2 := newNode("n2", testutil.WithProviderID(providerID(in2.Zone, in2.ID)), notReady)
	e.fake.SetAccessKeys("AKIDNOTOURS")
	e.fake.RemoveInstance(in2.ID) // gone, but EC2 cannot say so while it refuses us
	client := testutil.RunNodeControllers(t, e.cloud, 100*time.Millisecond, n1, n2)
	nodesLeft := func() int {
		l, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	eventually(t, "EC2 refusing several lookups", func() error {
		if r := e.fake.Rejected(); r < 6 {
			return fmt.Errorf("%d requests refused", r)
		}
		return nil
	})
	if n := nodesLeft(); n != 2 {
		t.Fatalf("EC2 refusing the credentials: %d Nodes left, want 2", n)
	}
	e.fake.SetAccessKeys()
	before := e.fake.TotalAttempts()
	e.fake.Throttle(1 << 20)
	eventually(t, "EC2 throttling several lookups", func() error {
		if n := e.fake.TotalAttempts() - before; n < 12 {
			return fmt.Errorf("%d requests throttled", n)
		}
		return nil
	})
	if n := nodesLeft(); n != 2 {
		t.Fatalf("EC2 throttling every call: %d Nodes left, want 2", n)
	}
	e.fake.Throttle(0)
	eventually(t, "the gone instance's Node deleted", func() error { return nodeCount(client, 1) })
	if _, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{}); err != nil {
		t.Errorf("the live instance's Node: %v", err)
	}
}

func nodeCount(client *fake.Clientset, want int) error {
	l, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(l.Items) != want {
		return fmt.Errorf("%d Nodes", len(l.Items))
	}
	return nil
}
