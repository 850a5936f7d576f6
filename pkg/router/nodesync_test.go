package router

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// staleCluster starts r's informers over a fake API server holding two
// nodes of the "other" backend and services, and waits until they synced.
func staleCluster(t *testing.T, r *Router, svcs ...*corev1.Service) (*fakeCluster, []*corev1.Node) {
	t.Helper()
	nodes := []*corev1.Node{
		newNode("ec2-1", withProviderID("aws:///eu-west-1a/i-1")),
		newNode("ec2-2", withProviderID("aws:///eu-west-1a/i-2")),
	}
	c := startCluster(t, r, append(objects(nodes), objects(svcs)...)...)
	c.run(t, func(context.Context) {})
	return c, nodes
}

// withIngress gives the Service the address "other" hands out, as the
// service controller writes it after a first ensure.
func withIngress(s *corev1.Service) {
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
}

func (r *Router) staleQueued() int64 { return r.st.Resync.Load().StaleQueued.Load() }

// TestStaleEnsureIsRetargeted: an EnsureLoadBalancer handed a node list
// older than the lister's (upstream's service worker listed the nodes
// before its node-sync worker's Update took the Service's lock) is followed
// by an update with the current nodes. Upstream would not re-sync until the
// next node-set change.
func TestStaleEnsureIsRetargeted(t *testing.T) {
	r, other := metalAndOther(t)
	svc := newService("shop", withLBBackend("other"), withIngress)
	_, nodes := staleCluster(t, r, svc)

	if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if got := r.staleQueued(); got != 1 {
		t.Errorf("stale re-syncs queued = %d, want 1", got)
	}
	var updates int
	var targets string
	defer func() {
		if t.Failed() {
			t.Logf("updates %d, targets %q, stale re-syncs queued %d", updates, targets, r.staleQueued())
		}
	}()
	eventually(t, "the load balancer updated with both nodes", func() bool {
		updates, targets = other.updatesOf(svc), other.targetsOf(svc)
		return updates == 1 && targets == "ec2-1=,ec2-2="
	})
	// The re-sync's own update does not queue another one.
	if got := r.staleQueued(); got != 1 {
		t.Errorf("stale re-syncs queued after the re-sync = %d, want 1", got)
	}
}

// TestCurrentEnsureIsNotRetargeted: an EnsureLoadBalancer or
// UpdateLoadBalancer handed the lister's nodes queues nothing; a later
// stale Service's re-sync completing shows the queue drained without
// touching the first.
func TestCurrentEnsureIsNotRetargeted(t *testing.T) {
	r, other := metalAndOther(t)
	svc := newService("shop", withLBBackend("other"), withIngress)
	marker := newService("marker", withLBBackend("other"), withIngress)
	_, nodes := staleCluster(t, r, svc, marker)
	ctx := context.Background()

	// Another order than the lister's: the same set.
	current := []*corev1.Node{nodes[1], nodes[0]}
	if _, err := r.EnsureLoadBalancer(ctx, cluster, svc, current); err != nil {
		t.Fatal(err)
	}
	if err := r.UpdateLoadBalancer(ctx, cluster, svc, current); err != nil {
		t.Fatal(err)
	}
	if got := r.staleQueued(); got != 0 {
		t.Fatalf("stale re-syncs queued = %d, want 0", got)
	}
	if _, err := r.EnsureLoadBalancer(ctx, cluster, marker, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the marker's re-sync", func() bool { return other.updatesOf(marker) == 1 })
	if got := other.updatesOf(svc); got != 1 {
		t.Errorf("updates of the current Service = %d, want only its own 1", got)
	}
	if got := r.staleQueued(); got != 1 {
		t.Errorf("stale re-syncs queued = %d, want 1 (the marker)", got)
	}
}

// TestStaleCheckSkipsUnservedAndDeleting: a Service implemented elsewhere
// or being deleted queues nothing, whatever the nodes it is handed.
func TestStaleCheckSkipsUnservedAndDeleting(t *testing.T) {
	r, other := metalAndOther(t)
	elsewhere := newService("elsewhere", withIngress)
	deleting := newService("deleting", withLBBackend("other"), withIngress)
	_, nodes := staleCluster(t, r, elsewhere, deleting)
	ctx := context.Background()

	if _, err := r.EnsureLoadBalancer(ctx, cluster, elsewhere, nodes[:1]); !errors.Is(err, cloudprovider.ImplementedElsewhere) {
		t.Fatalf("EnsureLoadBalancer of an unserved Service: %v, want ImplementedElsewhere", err)
	}
	if err := r.UpdateLoadBalancer(ctx, cluster, elsewhere, nodes[:1]); !errors.Is(err, cloudprovider.ImplementedElsewhere) {
		t.Fatalf("UpdateLoadBalancer of an unserved Service: %v, want ImplementedElsewhere", err)
	}
	if _, err := r.EnsureLoadBalancer(ctx, cluster, deleting, nodes); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	deleting = deleting.DeepCopy()
	deleting.DeletionTimestamp = &now
	if err := r.UpdateLoadBalancer(ctx, cluster, deleting, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if got := r.staleQueued(); got != 0 {
		t.Errorf("stale re-syncs queued = %d, want 0", got)
	}
	if got := other.updatesOf(deleting); got != 1 {
		t.Errorf("updates of the deleting Service = %d, want only its own 1", got)
	}
}

// TestStaleCheckWithoutInformers: a router never given informers (no
// re-sync running) serves stale lists as handed.
func TestStaleCheckWithoutInformers(t *testing.T) {
	other := newLBCloud("other", "198.51.100.7")
	r := mustRouter(t, testConfig(), lbBackend("other", "aws", other))
	svc := newService("shop", withLBBackend("other"), withIngress)
	node := newNode("ec2-1", withProviderID("aws:///eu-west-1a/i-1"))
	if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, []*corev1.Node{node}); err != nil {
		t.Fatal(err)
	}
	if r.st.Resync.Load() != nil || other.targetsOf(svc) != "ec2-1=" {
		t.Errorf("without informers: re-sync %v, targets %q", r.st.Resync.Load() != nil, other.targetsOf(svc))
	}
}

// TestStaleCheckSkippedForCallerThatRequeues: a call whose caller queues
// the Service again itself on a node change (RequeuesOnNodeChange:
// pkg/lbcontroller) is not compared with the lister's nodes, stale or
// not: the comparison, two passes over every node, found nothing the
// caller would not (TestNodeAddedDuringUpdateUpdatesTheNLBOnce in
// pkg/lbcontroller counts the updates). The same stale calls without the
// mark queue the re-sync.
func TestStaleCheckSkippedForCallerThatRequeues(t *testing.T) {
	r, _ := metalAndOther(t)
	svc := newService("shop", withLBBackend("other"), withIngress)
	_, nodes := staleCluster(t, r, svc)
	ctx := RequeuesOnNodeChange(context.Background())

	if _, err := r.EnsureLoadBalancer(ctx, cluster, svc, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if err := r.UpdateLoadBalancer(ctx, cluster, svc, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if got := r.staleQueued(); got != 0 {
		t.Fatalf("stale re-syncs queued for a caller that requeues itself = %d, want 0", got)
	}
	if err := r.UpdateLoadBalancer(context.Background(), cluster, svc, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if got := r.staleQueued(); got != 1 {
		t.Errorf("stale re-syncs queued for the service controller's stale update = %d, want 1", got)
	}
}
