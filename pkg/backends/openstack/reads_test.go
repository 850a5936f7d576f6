package openstack

import (
	"context"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"
)

// TestConvergedEnsureReads: on the real Octavia, an Ensure of a converged
// one-port load balancer makes no mutating call and 4 reads (the load
// balancer by tag, its listeners, its pools, the monitor): the members are
// remembered while the pool's member IDs and updated_at are unchanged.
// While a load balancer has no listener its pools are not listed, and a
// pool without members has no member listing.
func TestConvergedEnsureReads(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.25.0.1")), newNode("n2", withInternalIP("10.25.0.2"))}
	svc := newService("reads")
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })
	ensureConverged(t, c.lb, svc, nodes)
	r0, w0 := apiCalls(t, c)
	if _, err := c.lb.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	r1, w1 := apiCalls(t, c)
	if r1-r0 != 4 || w1 != w0 {
		t.Errorf("converged Ensure: %v reads, %v writes; want 4 and 0", r1-r0, w1-w0)
	}

	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := loadbalancers.Create(ctx, sc.loadBalancer, loadbalancers.CreateOpts{Name: "mccm-reads-bare-" + randomID(t), VipSubnetID: VIPSubnetForTests}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		waitActive(t, sc.loadBalancer, lb.ID)
		if err := loadbalancers.Delete(ctx, sc.loadBalancer, lb.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr(); err != nil {
			t.Error(err)
		}
	})
	waitActive(t, sc.loadBalancer, lb.ID)
	r0, _ = apiCalls(t, c)
	st, err := c.lb.state(ctx, sc, lb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r1, _ := apiCalls(t, c); len(st.listeners) != 0 || r1-r0 != 1 {
		t.Errorf("a load balancer without listeners: %d listeners, %v reads; want 0 and 1 (no pool listing)", len(st.listeners), r1-r0)
	}
}
