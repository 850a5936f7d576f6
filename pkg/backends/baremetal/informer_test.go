package baremetal

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

func TestReadyWaitsForInformer(t *testing.T) {
	client := fake.NewClientset(newService("old", withStatus("192.0.2.1")))
	lb := newTestCloud(t, lbSection).lb
	factory := informers.NewSharedInformerFactory(client, 0)
	lb.SetInformers(factory)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := lb.EnsureLoadBalancer(ctx, "c1", newService("new"), nil); err == nil || !strings.Contains(err.Error(), "waiting for the Service informer to sync") {
		t.Fatalf("EnsureLoadBalancer with an unstarted informer: %v", err)
	}
	if lb.holders() != 0 {
		t.Fatal("allocated before the informer synced")
	}

	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	st, err := lb.EnsureLoadBalancer(context.Background(), "c1", newService("new"), nil)
	if err != nil || ingressIPs(st) != "192.0.2.2" {
		t.Fatalf("EnsureLoadBalancer after sync = %q, %v; want 192.0.2.2 (192.0.2.1 is in a status)", ingressIPs(st), err)
	}
	if _, exists, err := lb.GetLoadBalancer(context.Background(), "c1", newService("old")); !exists || err != nil {
		t.Errorf("GetLoadBalancer(old) = %v, %v; want it seeded as ours", exists, err)
	}
}

func TestDeletedServiceReleased(t *testing.T) {
	old := newService("old", withStatus("192.0.2.1"))
	client, lb := informedLB(t, old)
	ctx := context.Background()
	if _, _, err := lb.GetLoadBalancer(ctx, "c1", old); err != nil {
		t.Fatal(err)
	}

	// A Service recreated under the same name keeps its addresses when the
	// old object's delete event arrives late.
	lb.onDelete(cache.DeletedFinalStateUnknown{Key: "default/old", Obj: newService("old", func(s *corev1.Service) { s.UID = types.UID("other") })})
	if _, exists, _ := lb.GetLoadBalancer(ctx, "c1", old); !exists {
		t.Fatal("a delete event for another object with the same name released the Service")
	}

	if err := client.CoreV1().Services("default").Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, exists, err := lb.GetLoadBalancer(ctx, "c1", old)
		return !exists, err
	})
	if err != nil {
		t.Fatalf("deleted Service still holds its address: %v", err)
	}
}

// TestStatusFollowed: addresses a status shows are taken when they appear
// and freed when no status shows them, unless the backend assigned them (a
// status written before the assignment reached it never frees them).
func TestStatusFollowed(t *testing.T) {
	lb := newTestLB(t, lbSection)
	ctx := context.Background()
	other := func(ips ...string) *corev1.Service {
		return newService("other", withStatus(ips...), func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("x.io/lb") })
	}
	lb.onChange(other("192.0.2.1"))
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("mine"), nil); err != nil || ingressIPs(st) != "192.0.2.2" {
		t.Fatalf("EnsureLoadBalancer(mine) = %q, %v; want 192.0.2.2 (192.0.2.1 is in another status)", ingressIPs(st), err)
	}
	lb.onChange(other())
	if _, err := lb.EnsureLoadBalancer(ctx, "c1", newService("third", withIPs("192.0.2.1")), nil); err != nil {
		t.Fatalf("192.0.2.1 left the other status but is still taken: %v", err)
	}
	lb.onChange(newService("mine"))
	_, err := lb.EnsureLoadBalancer(ctx, "c1", newService("fourth", withIPs("192.0.2.2")), nil)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != ReasonIPInUse {
		t.Fatalf("an empty status of mine freed its assigned 192.0.2.2: %v", err)
	}
}

// TestDecisionChecksIndex: a status in the informer's cache that the
// handler has not reached yet still keeps its address from being handed
// out.
func TestDecisionChecksIndex(t *testing.T) {
	lb := newTestCloud(t, lbSection).lb
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	lb.SetInformers(factory)
	lb.Seed(nil)
	late := newService("late", withStatus("192.0.2.1"))
	if err := factory.Core().V1().Services().Informer().GetIndexer().Add(late); err != nil {
		t.Fatal(err)
	}
	st, err := lb.EnsureLoadBalancer(context.Background(), "c1", newService("new"), nil)
	if err != nil || ingressIPs(st) != "192.0.2.2" {
		t.Fatalf("EnsureLoadBalancer = %q, %v; want 192.0.2.2 (192.0.2.1 is in a cached status)", ingressIPs(st), err)
	}
	if _, exists, _ := lb.GetLoadBalancer(context.Background(), "c1", late); !exists {
		t.Error("the late Service's address was not recorded as held")
	}
}

// TestRequestsReserved: an address any Service requests (in our annotation,
// spec.loadBalancerIP, or kube-vip's or MetalLB's annotation) is never
// allocated automatically to another; the Service requesting it gets it,
// and it is free again once no Service requests it.
func TestRequestsReserved(t *testing.T) {
	lb := newTestLB(t, lbSection)
	ctx := context.Background()
	vip := func(tweaks ...svcTweak) *corev1.Service {
		return newService("vip", append(tweaks, func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("kube-vip.io/kube-vip-class") })...)
	}
	for _, tt := range []struct {
		name    string
		request svcTweak
	}{
		{"kube-vip annotation", withAnnotation("kube-vip.io/loadbalancerIPs", "192.0.2.1")},
		{"metallb annotation", withAnnotation("metallb.io/loadBalancerIPs", "192.0.2.1,2001:db8::")},
		{"our annotation", withIPs("192.0.2.1")},
		{"spec.loadBalancerIP", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "192.0.2.1" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lb := newTestLB(t, lbSection)
			lb.onChange(vip(tt.request))
			if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("auto"), nil); err != nil || ingressIPs(st) != "192.0.2.2" {
				t.Fatalf("EnsureLoadBalancer(auto) = %q, %v; want 192.0.2.2 (192.0.2.1 is requested)", ingressIPs(st), err)
			}
		})
	}

	lb.onChange(vip(withIPs("192.0.2.1")))
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("auto"), nil); err != nil || ingressIPs(st) != "192.0.2.2" {
		t.Fatalf("EnsureLoadBalancer(auto) = %q, %v; want 192.0.2.2", ingressIPs(st), err)
	}
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", vip(withIPs("192.0.2.1")), nil); err != nil || ingressIPs(st) != "192.0.2.1" {
		t.Fatalf("EnsureLoadBalancer(vip) = %q, %v; the requester gets its address", ingressIPs(st), err)
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, "c1", vip()); err != nil {
		t.Fatal(err)
	}
	lb.onDelete(vip())
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("third"), nil); err != nil || ingressIPs(st) != "192.0.2.1" {
		t.Fatalf("EnsureLoadBalancer(third) = %q, %v; want 192.0.2.1, free once its requester is gone", ingressIPs(st), err)
	}
}

// TestRequestNotReservedByClusterIP (chaos seed 529377671): a Service
// changed to ClusterIP keeping its requested address annotation (as
// kubectl edit leaves it) no longer holds that address back: auto-assign
// may give it, and addresses_in_use counts only what the statuses show.
func TestRequestNotReservedByClusterIP(t *testing.T) {
	lb := newTestLB(t, lbSection)
	asked := newService("asked", withIPs("192.0.2.1"))
	lb.onChange(asked)
	if used := lb.poolUsage()[0].Used; used != 1 {
		t.Fatalf("a LoadBalancer Service requesting an address: %d in use, want 1 (reserved)", used)
	}
	asked.Spec.Type = corev1.ServiceTypeClusterIP
	lb.onChange(asked)
	if used := lb.poolUsage()[0].Used; used != 0 {
		t.Errorf("the same Service made ClusterIP: %d in use, want 0", used)
	}
	if st, err := lb.EnsureLoadBalancer(context.Background(), "c1", newService("auto"), nil); err != nil || ingressIPs(st) != "192.0.2.1" {
		t.Errorf("EnsureLoadBalancer(auto) = %q, %v; want 192.0.2.1, no LoadBalancer Service requests it", ingressIPs(st), err)
	}
}

// TestRequestsReservedLargeRange: the same in a range too large for a
// bitmap, where allocation probes addresses one by one.
func TestRequestsReservedLargeRange(t *testing.T) {
	lb := newTestLB(t, `addressPools: [{name: p, addresses: ["2001:db8::/64"]}]`)
	lb.onChange(newService("vip", withAnnotation("kube-vip.io/loadbalancerIPs", "2001:db8::,2001:db8::1")))
	st, err := lb.EnsureLoadBalancer(context.Background(), "c1", newService("auto", withFamilies(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol)), nil)
	if err != nil || ingressIPs(st) != "2001:db8::2" {
		t.Fatalf("EnsureLoadBalancer(auto) = %q, %v; want 2001:db8::2", ingressIPs(st), err)
	}
}

// TestDeleteKeepsShownAddress: EnsureLoadBalancerDeleted frees an address
// only once the Service's status no longer shows it (the router may delete
// before the status is cleared), so no Service ever shows an address handed
// out again.
func TestDeleteKeepsShownAddress(t *testing.T) {
	ctx := context.Background()
	old := newService("old", withStatus("192.0.2.1"))
	client, lb := informedLB(t, old)

	if st, err := lb.EnsureLoadBalancer(ctx, "c1", old, nil); err != nil || ingressIPs(st) != "192.0.2.1" {
		t.Fatalf("EnsureLoadBalancer(old) = %q, %v", ingressIPs(st), err)
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, "c1", old); err != nil {
		t.Fatal(err)
	}
	if _, exists, _ := lb.GetLoadBalancer(ctx, "c1", old); !exists {
		t.Error("GetLoadBalancer(old) = false while its status still shows 192.0.2.1")
	}
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("new"), nil); err != nil || ingressIPs(st) != "192.0.2.2" {
		t.Fatalf("EnsureLoadBalancer(new) = %q, %v; want 192.0.2.2: old's status still shows 192.0.2.1", ingressIPs(st), err)
	}

	cleared := old.DeepCopy()
	cleared.Status.LoadBalancer.Ingress = nil
	if _, err := client.CoreV1().Services("default").UpdateStatus(ctx, cleared, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := lb.EnsureLoadBalancer(ctx, "c1", newService("third", withIPs("192.0.2.1")), nil)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("192.0.2.1 still taken after old's status was cleared: %v", err)
	}
	if _, exists, _ := lb.GetLoadBalancer(ctx, "c1", old); exists {
		t.Error("GetLoadBalancer(old) = true after its status was cleared")
	}
}

// TestRecreatedRequesterKeepsReservation: the late delete event of an old
// object does not drop the request of a new Service of the same name.
func TestRecreatedRequesterKeepsReservation(t *testing.T) {
	lb := newTestLB(t, lbSection)
	lb.onChange(newService("vip", withIPs("192.0.2.1")))
	lb.onDelete(cache.DeletedFinalStateUnknown{Key: "default/vip", Obj: newService("vip", func(s *corev1.Service) { s.UID = "old" })})
	if st, err := lb.EnsureLoadBalancer(context.Background(), "c1", newService("auto"), nil); err != nil || ingressIPs(st) != "192.0.2.2" {
		t.Fatalf("EnsureLoadBalancer(auto) = %q, %v; want 192.0.2.2: the new vip still requests 192.0.2.1", ingressIPs(st), err)
	}
}

// informedLB is a bare-metal load balancer whose Service informer is
// started over a fake clientset holding objs, until the test ends.
func informedLB(t *testing.T, objs ...runtime.Object) (*fake.Clientset, *LoadBalancer) {
	t.Helper()
	client := fake.NewClientset(objs...)
	lb := newTestCloud(t, lbSection).lb
	factory := informers.NewSharedInformerFactory(client, 0)
	lb.SetInformers(factory)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	return client, lb
}

// TestRefusedRequestReleasesAssignment (chaos seeds 265027605 and
// 657511863): a sharer that requests an address it may not share (held by
// a keyless Service) is refused, and the router takes the address it had
// out of its status; the allocator then holds that address no longer:
// addresses_in_use counts only what the statuses show or the Services
// request, and another Service may get it. While the status still shows
// it, it stays taken.
func TestRefusedRequestReleasesAssignment(t *testing.T) {
	ctx := context.Background()
	keyless := newService("s1", withStatus("192.0.2.1"))
	sharer := newService("sh0", withShared("k1"), withPorts(8080), withIPs("192.0.2.2"))
	client, lb := informedLB(t, keyless, sharer)
	services := client.CoreV1().Services("default")

	if st, err := lb.EnsureLoadBalancer(ctx, "c1", keyless, nil); err != nil || ingressIPs(st) != "192.0.2.1" {
		t.Fatalf("EnsureLoadBalancer(s1) = %q, %v; want 192.0.2.1", ingressIPs(st), err)
	}
	st, err := lb.EnsureLoadBalancer(ctx, "c1", sharer, nil)
	if err != nil || ingressIPs(st) != "192.0.2.2" {
		t.Fatalf("EnsureLoadBalancer(sh0) = %q, %v; want 192.0.2.2", ingressIPs(st), err)
	}
	sharer.Status.LoadBalancer = *st
	if _, err := services.UpdateStatus(ctx, sharer, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "sh0's status 192.0.2.2 followed", func() bool {
		lb.mu.Lock()
		defer lb.mu.Unlock()
		h := lb.alloc.holdingOf("default/sh0")
		return h != nil && len(h.status) == 1 && h.status[0].String() == "192.0.2.2"
	})

	// sh0 asks for s1's address, keeping its key: refused.
	sharer.Annotations[string(annotation.LoadBalancerIPs)] = "192.0.2.1"
	if _, err := services.Update(ctx, sharer, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = lb.EnsureLoadBalancer(ctx, "c1", sharer, nil)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != ReasonIPInUse {
		t.Fatalf("EnsureLoadBalancer(sh0 requesting 192.0.2.1) = %v; want %s", err, ReasonIPInUse)
	}
	// Its status still shows 192.0.2.2: nobody else gets it.
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("other"), nil); err == nil {
		t.Fatalf("EnsureLoadBalancer(other) = %q while sh0's status shows 192.0.2.2 and s1 holds 192.0.2.1; want the pool exhausted", ingressIPs(st))
	}

	// The router takes the refused address out of sh0's status.
	sharer.Status.LoadBalancer.Ingress = nil
	if _, err := services.UpdateStatus(ctx, sharer, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var used uint64
	if !poll(func() bool { used = lb.poolUsage()[0].Used; return used == 1 }) {
		t.Fatalf("addresses in use = %d after sh0 was refused and its status cleared; want 1 (192.0.2.1: s1's status, sh0's request)", used)
	}
	if got, _ := testutil.GetGaugeMetricValue(addressesInUse.WithLabelValues("metal", "auto", "IPv4")); got != 1 {
		t.Errorf("addresses_in_use_total{pool=auto,family=IPv4} = %v; want 1", got)
	}
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("other"), nil); err != nil || ingressIPs(st) != "192.0.2.2" {
		t.Errorf("EnsureLoadBalancer(other) = %q, %v; want 192.0.2.2, which no Service shows, requests or was given", ingressIPs(st), err)
	}
}

// poll reports whether cond holds within 5 s.
func poll(cond func() bool) bool {
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	return err == nil
}

// waitFor fails the test unless cond holds within 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}
