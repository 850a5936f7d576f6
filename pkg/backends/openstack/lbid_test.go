package openstack

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestOctaviaReportsTheLoadBalancerID: on the real Octavia, a converged
// EnsureLoadBalancer reports the Octavia load balancer's ID, which the
// router writes to multicloud-ccm.io/load-balancer-id, and OCCM's
// loadbalancer.openstack.org/load-balancer-id and -address.
func TestOctaviaReportsTheLoadBalancerID(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	svc := newService("web")
	nodes := []*corev1.Node{newNode("vm-a", withInternalIP("10.0.0.11"))}
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })

	var (
		reported func() string
		ctx      context.Context
	)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, reported = backends.WithLoadBalancerIDReport(context.Background())
		_, err := c.lb.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
		if err == nil {
			break
		}
		if (!isRetry(err) && !sqliteLocked(err)) || time.Now().After(deadline) {
			t.Fatalf("EnsureLoadBalancer: %v", err)
		}
		if got := reported(); got != "" {
			t.Errorf("a call that asked to retry reported %q", got)
		}
		time.Sleep(c.lb.retryDelay)
	}
	sc, err := c.lb.clients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found, err := c.lb.find(context.Background(), sc, svc)
	if err != nil || len(found) != 1 {
		t.Fatalf("find: %d load balancers, %v", len(found), err)
	}
	if got := reported(); got != found[0].ID {
		t.Errorf("reported %q, want the Octavia load balancer's ID %q", got, found[0].ID)
	}
	want := map[string]string{string(AnnotationLoadBalancerID): found[0].ID, string(AnnotationLoadBalancerAddress): found[0].VipAddress}
	if got := backends.ReportedServiceAnnotations(ctx); !maps.Equal(got, want) {
		t.Errorf("reported annotations %v, want OCCM's %v", got, want)
	}
	if keys := slices.Sorted(slices.Values(backends.ServiceAnnotationsOf(Type))); !slices.Equal(keys, slices.Sorted(maps.Keys(want))) {
		t.Errorf("registered write-back annotations %v, want %v", keys, slices.Sorted(maps.Keys(want)))
	}
}
