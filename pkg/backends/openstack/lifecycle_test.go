package openstack

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// notReady makes a node NotReady, so the node-lifecycle controller asks
// about it every period.
func notReady(n *corev1.Node) {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
}

// uninitialised taints a node as a kubelet with --cloud-provider=external
// registers it.
func uninitialised(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule})
}

// TestNodeLifecycleKeepsOtherRegionsNodes drives the upstream cloud-node
// and node-lifecycle controllers against a RegionOne backend: Nodes of
// RegionTwo, named by their providerID or (openstack:///<uuid>) by the
// region label InstanceMetadata had set, are never deleted though this
// region's Nova answers 404 for their servers; nor is the Node of a server
// Nova reports UNKNOWN. The Node of a RegionOne server Nova answers 404 for
// is deleted, which shows the controller ran. Beside the other tests (its
// fake, backend and API server are its own): it waits on the
// controllers' rounds for seconds.
func TestNodeLifecycleKeepsOtherRegionsNodes(t *testing.T) {
	t.Parallel()
	f := NewFakeOpenStack(t)
	standardServers(f)
	f.AddServer(FakeNovaServer{ID: uuidU, Name: "vm-u", Zone: "az-1", Flavor: "m1.small", Status: statusUnknown})
	s := f.Settings(t)
	s.Instances.CacheTTLSeconds = 1
	c := fakeCloud(t, s)
	client := testutil.RunNodeControllers(t, c, 200*time.Millisecond,
		newNode("regional", notReady, withProviderID("openstack://RegionTwo/"+uuidX)),
		newNode("labelled", notReady, withProviderID("openstack:///"+uuidX), withLabel(corev1.LabelTopologyRegion, "RegionTwo")),
		newNode("beta-labelled", notReady, withProviderID("openstack:///"+uuidX), withLabel(corev1.LabelFailureDomainBetaRegion, "RegionTwo")),
		newNode("unknown", notReady, withProviderID("openstack:///"+uuidU), withLabel(corev1.LabelTopologyRegion, "RegionOne")),
		newNode("gone", notReady, withProviderID("openstack:///"+uuidGone), withLabel(corev1.LabelTopologyRegion, "RegionOne")),
		newNode("vm-a", notReady, uninitialised),
	)
	// What tells a region-less providerID's region later: the region label
	// upstream writes from InstanceMetadata at initialisation.
	testutil.Eventually(t, 30*time.Second, "vm-a initialised with its region", func() error {
		n, _ := testutil.GetNode(t, client, "vm-a")
		if n == nil || n.Spec.ProviderID != "openstack:///"+uuidA || n.Labels[corev1.LabelTopologyRegion] != "RegionOne" {
			return fmt.Errorf("node %+v", n)
		}
		return nil
	})
	testutil.Eventually(t, 30*time.Second, "the gone RegionOne server's Node deleted", func() error {
		if _, ok := testutil.GetNode(t, client, "gone"); ok {
			return fmt.Errorf("still there")
		}
		return nil
	})
	before := f.CallCount("GET /compute/v2.1/servers/detail")
	testutil.Eventually(t, 30*time.Second, "more lifecycle rounds", func() error {
		if f.CallCount("GET /compute/v2.1/servers/detail") < before+3 {
			return fmt.Errorf("only %d listings since", f.CallCount("GET /compute/v2.1/servers/detail")-before)
		}
		return nil
	})
	for _, name := range []string{"regional", "labelled", "beta-labelled", "unknown"} {
		if _, ok := testutil.GetNode(t, client, name); !ok {
			t.Errorf("Node %s deleted: its server is in a region this backend does not serve, or unreadable", name)
		}
	}
	if n := f.CallCount("GET /compute/v2.1/servers/" + uuidX); n != 0 {
		t.Errorf("this region's Nova was asked %d times about another region's server", n)
	}
}
