package router

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// driftingCloud is an lbCloud that reports a change (backends.ReportChange)
// whenever it ensures a load balancer it already holds, as a backend that
// found one changed out of band and repaired it.
type driftingCloud struct {
	*lbCloud
	change string
}

func (c *driftingCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *driftingCloud) EnsureLoadBalancer(ctx context.Context, cl string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	if c.holds(s) {
		backends.ReportChange(ctx, c.change)
	}
	return c.lbCloud.EnsureLoadBalancer(ctx, cl, s, nodes)
}

// TestChangesAttributedToTheirBackend: of a Service served by two
// backends, a change one of them reports is attributed to that one alone
// (backends.ChangedBackends), so the load-balancer controller counts a
// drift repair in the backend that drifted, not in "a,b".
func TestChangesAttributedToTheirBackend(t *testing.T) {
	a := newLBCloud("a", "198.51.100.1")
	b := &driftingCloud{lbCloud: newLBCloud("b", "203.0.113.2"), change: "listener TCP:80 re-created"}
	r := mustRouter(t, testConfig(), Backend{Name: "a", Type: "aws", Scheme: "aws", Cloud: a}, Backend{Name: "b", Type: "openstack", Scheme: "openstack", Cloud: b})
	c := startCluster(t, r, newService("web", withLBBackend("a,b")))

	ctx, changes := backends.WithChangeReport(context.Background())
	if _, err := r.EnsureLoadBalancer(ctx, cluster, c.service(t, "web"), nil); err != nil {
		t.Fatal(err)
	}
	if got := changes(); len(got) != 0 {
		t.Errorf("creation reported %q, want nothing", got)
	}
	if !a.holds(c.service(t, "web")) || !b.holds(c.service(t, "web")) {
		t.Fatal("not served by both backends")
	}

	ctx, changes = backends.WithChangeReport(context.Background())
	if _, err := r.EnsureLoadBalancer(ctx, cluster, c.service(t, "web"), nil); err != nil {
		t.Fatal(err)
	}
	if got := changes(); !slices.Equal(got, []string{b.change}) {
		t.Errorf("reported %q, want [%q]", got, b.change)
	}
	if got := backends.ChangedBackends(ctx); !slices.Equal(got, []string{"b"}) {
		t.Errorf("changed backends %q, want [b]", got)
	}

	// Outside a change report the backend's reports go nowhere, and the
	// router adds nothing to the context it hands the backend.
	if got := backends.WithChangeBackend(context.Background(), "b"); got != context.Background() {
		t.Errorf("WithChangeBackend outside a report = %v, want the context unchanged", got)
	}
}
