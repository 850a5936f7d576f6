package router

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	routecontroller "k8s.io/cloud-provider/controllers/route"
	upstreamfake "k8s.io/cloud-provider/fake"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	_ "k8s.io/controller-manager/pkg/features/register" // the route controller reads its feature gates.

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/dispatch"
)

// brokenRoutes is a backend with instances and routes whose every route
// call fails, counting deletes.
type brokenRoutes struct {
	*upstreamfake.Cloud
	deletes, creates atomic.Int64
}

func (c *brokenRoutes) Routes() (cloudprovider.Routes, bool) { return c, true }

func (c *brokenRoutes) ListRoutes(context.Context, string) ([]*cloudprovider.Route, error) {
	return nil, errCloudDown
}

func (c *brokenRoutes) CreateRoute(context.Context, string, string, *cloudprovider.Route) error {
	c.creates.Add(1)
	return errCloudDown
}

func (c *brokenRoutes) DeleteRoute(context.Context, string, *cloudprovider.Route) error {
	c.deletes.Add(1)
	return errCloudDown
}

func withPodCIDR(cidr string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr} }
}

func routed(n *corev1.Node) {
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
		Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated"})
}

func networkUnavailable(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestBrokenRouteBackendKeepsOthersRoutes drives the upstream route
// controller with two route backends, one failing every call: the other's
// new node gets its route, the broken one's routed node keeps its state
// (no delete, no NetworkUnavailable), and its node that never had a route
// is reported NetworkUnavailable, which is the truth.
func TestBrokenRouteBackendKeepsOthersRoutes(t *testing.T) {
	good := &upstreamfake.Cloud{EnableInstancesV2: true, ExistsByProviderID: true, DisableLoadBalancers: true, RouteMap: map[string]*upstreamfake.Route{}}
	broken := &brokenRoutes{Cloud: &upstreamfake.Cloud{EnableInstancesV2: true, ExistsByProviderID: true, DisableLoadBalancers: true}}
	r := mustRouter(t, testConfig(), Backend{Name: "good", Scheme: "aws", Cloud: good}, Backend{Name: "broken", Scheme: "openstack", Cloud: broken})
	nodes := []*corev1.Node{
		newNode("ec2-1", withProviderID("aws:///eu-west-1a/i-1"), withPodCIDR("10.244.1.0/24")),
		newNode("os-1", withProviderID("openstack:///aaaa"), withPodCIDR("10.244.2.0/24"), routed),
		newNode("os-2", withProviderID("openstack:///bbbb"), withPodCIDR("10.244.3.0/24")),
	}
	c := startCluster(t, r, objects(nodes)...)
	_, clusterCIDR, _ := net.ParseCIDR("10.244.0.0/16")
	ctrl, err := routecontroller.New(r, c.client, c.factory.Core().V1().Nodes(), cluster, []*net.IPNet{clusterCIDR})
	if err != nil {
		t.Fatal(err)
	}
	c.run(t, func(ctx context.Context) {
		ctrl.Run(ctx, 100*time.Millisecond, controllersmetrics.NewControllerManagerMetrics("test"))
	})
	eventually(t, "ec2-1's route created in good", func() bool {
		routes, _ := good.ListRoutes(context.Background(), cluster)
		return len(routes) == 1 && routes[0].TargetNode == "ec2-1"
	})
	eventually(t, "os-2 reported NetworkUnavailable", func() bool { n, _ := c.node(t, "os-2"); return networkUnavailable(n) })
	eventually(t, "several reconciles", func() bool { return broken.creates.Load() >= 3 })
	if n, _ := c.node(t, "os-1"); networkUnavailable(n) || !dispatch.RoutesCreated(n) {
		t.Errorf("os-1, routed before the outage, now has conditions %v", n.Status.Conditions)
	}
	if d := broken.deletes.Load(); d != 0 {
		t.Errorf("the route controller tried to delete %d routes of the broken backend", d)
	}
}

// TestListRoutesFailsWhenNoBackendCanList: with nothing listed at all, the
// call fails rather than report an empty table.
func TestListRoutesFailsWhenNoBackendCanList(t *testing.T) {
	broken := &brokenRoutes{Cloud: &upstreamfake.Cloud{EnableInstancesV2: true, DisableLoadBalancers: true}}
	r := mustRouter(t, testConfig(), Backend{Name: "broken", Scheme: "openstack", Cloud: broken})
	if _, err := r.ListRoutes(context.Background(), cluster); err == nil {
		t.Error("ListRoutes succeeded with no backend able to list")
	}
}
