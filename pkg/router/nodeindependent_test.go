package router

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/batch"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// TestNodeChangesSkipNodeIndependent: bare metal's load balancers ignore
// the nodes they are handed (backends.NodeIndependent), so neither a node's
// address change nor a stale node list queues a re-sync of its Services;
// at thousands of nodes those re-syncs were O(node changes × Services)
// (docs/scale.md, the churn loop). A backend that targets nodes still gets
// both (TestStaleEnsureIsRetargeted, TestNodeAddressChange*).
func TestNodeChangesSkipNodeIndependent(t *testing.T) {
	r, _ := metalAndOther(t)
	// Its address in status, as the service controller writes it after
	// the first ensure.
	vip := newService("vip", withLBBackend("metal"), func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	})
	nodes := []*corev1.Node{
		newNode("bm-1", withProviderID("baremetal://bm-1")),
		newNode("bm-2", withProviderID("baremetal://bm-2")),
	}
	c := startCluster(t, r, append(objects(nodes), vip)...)
	c.run(t, func(context.Context) {})
	ctx := context.Background()

	// A stale list (one node of two) handed to the bare-metal Service.
	if _, err := r.EnsureLoadBalancer(ctx, cluster, vip, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if got := r.staleQueued(); got != 0 {
		t.Errorf("a bare-metal load balancer handed a stale list queued %d re-syncs, want 0", got)
	}

	// A bare-metal node's addresses written, as at its initialisation.
	a := r.st.Resync.Load()
	lister := a.Services.Services(vip.Namespace)
	eventually(t, "the bare-metal Service's record in the lister", func() bool {
		s, err := lister.Get(vip.Name)
		return err == nil && len(r.lb.EnsuredIn(s)) == 1
	})
	changed := nodes[0].DeepCopy()
	changed.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.9.0.1"}}
	// The watcher's decision, on a queue no worker takes from.
	probe := &process.AddressResync{St: a.St, Services: a.Services,
		Batch: &batch.Timer{Quiet: time.Hour, Max: time.Hour, Flush: func() {}}}
	probe.EnqueueFor(nodes[0], changed)
	if n := len(probe.Pending); n != 0 {
		t.Errorf("a bare-metal node's address change queued %d bare-metal Services, want 0", n)
	}
}

// TestLoadBalancerTargets: a bare-metal Service's load balancer targets no
// node (our controller then re-syncs it for no node change); a Service of a
// backend that targets nodes targets those it can target.
func TestLoadBalancerTargets(t *testing.T) {
	r, _ := metalAndOther(t)
	nodes := []*corev1.Node{
		newNode("bm-1", withProviderID("baremetal://bm-1")),
		newNode("ec2-1", withProviderID("aws:///eu-west-1a/i-1")),
	}
	if got := r.LoadBalancerTargets(newService("vip", withLBBackend("metal")), nodes); len(got) != 0 {
		t.Errorf("bare metal targets %d nodes, want none", len(got))
	}
	got := r.LoadBalancerTargets(newService("nlb", withLBBackend("other")), nodes)
	if len(got) != 1 || got[0].Name != "ec2-1" {
		t.Errorf("the other backend targets %v, want [ec2-1]", got)
	}
}
