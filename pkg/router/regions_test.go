package router

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	upstreamfake "k8s.io/cloud-provider/fake"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/dispatch"
)

// regionCloud is an instance backend serving one region of providerIDs
// openstack://<region>/<id>: another region's node is a NodeOutsideRegion
// user error, as the AWS and OpenStack backends answer; of its own region
// it knows the instances in have.
type regionCloud struct {
	*upstreamfake.Cloud
	region string
	have   map[string]bool
}

func newRegionCloud(region string, have ...string) *regionCloud {
	c := &regionCloud{Cloud: &upstreamfake.Cloud{DisableLoadBalancers: true, DisableRoutes: true}, region: region, have: map[string]bool{}}
	for _, id := range have {
		c.have[id] = true
	}
	return c
}

func (c *regionCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

func (c *regionCloud) InstanceExists(_ context.Context, n *corev1.Node) (bool, error) {
	region, id, _ := strings.Cut(strings.TrimPrefix(n.Spec.ProviderID, "openstack://"), "/")
	if region != c.region {
		return false, backends.NewUserError(dispatch.ReasonOutsideRegion, errors.New("region "+region+" is not served here"))
	}
	return c.have[id], nil
}

func (c *regionCloud) InstanceShutdown(context.Context, *corev1.Node) (bool, error) {
	return false, nil
}

// TestOtherRegionsBackendHasNoSay drives the upstream node-lifecycle
// controller over two OpenStack backends of regions one and two, with
// unlabelled nodes (as a cluster migrated from upstream's provider has): a
// node region two reports gone is deleted although region one refuses it;
// a node of a region neither serves (its backend removed) stays, with a
// NodeOutsideRegion event; a running node of either region stays.
func TestOtherRegionsBackendHasNoSay(t *testing.T) {
	one, two := newRegionCloud("one", "a1"), newRegionCloud("two", "b1")
	r := mustRouter(t, testConfig(),
		Backend{Name: "os-one", Type: "openstack", Scheme: "openstack", Cloud: one},
		Backend{Name: "os-two", Type: "openstack", Scheme: "openstack", Cloud: two})
	nodes := []*corev1.Node{
		newNode("one-running", withProviderID("openstack://one/a1"), notReady),
		newNode("two-running", withProviderID("openstack://two/b1"), notReady),
		newNode("two-gone", withProviderID("openstack://two/b2"), notReady),
		newNode("three", withProviderID("openstack://three/c1"), notReady),
	}
	c := startCluster(t, r, objects(nodes)...)
	c.runNodeLifecycle(t, r)
	eventually(t, "two-gone deleted", func() bool { _, ok := c.node(t, "two-gone"); return !ok })
	eventually(t, "three NodeOutsideRegion event", func() bool {
		return strings.Contains(strings.Join(c.events(t, "three"), ","), "Warning/"+dispatch.ReasonOutsideRegion)
	})
	for _, name := range []string{"one-running", "two-running", "three"} {
		if _, ok := c.node(t, name); !ok {
			t.Errorf("node %s was deleted", name)
		}
	}
	md, err := r.InstanceMetadata(context.Background(), nodes[1])
	if err != nil || md == nil {
		t.Fatalf("InstanceMetadata(two-running) = %v, %v; want region two's backend to own it", md, err)
	}
	if got := md.AdditionalLabels["multicloud-ccm.io/backend"]; got != "os-two" {
		t.Errorf("two-running claimed by %q, want os-two", got)
	}
}
