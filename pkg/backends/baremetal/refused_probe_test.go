package baremetal

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Review probes (session 56) of LoadBalancer.refused (5eff0c2, 2a8da6b):
// a Service refused with a user error loses its assignment.

// kubeVIPProbeSection announces through kube-vip from a pool of two.
const kubeVIPProbeSection = "announce: kube-vip\naddressPools: [{name: p, addresses: [10.0.0.1-10.0.0.2]}]"

// kubeVIPLB is a bare-metal load balancer announcing through kube-vip,
// with a client (for its kube-vip annotation) and a Service informer over
// a fake clientset holding objs, until the test ends.
func kubeVIPLB(t *testing.T, objs ...*corev1.Service) (*fake.Clientset, *LoadBalancer) {
	t.Helper()
	var ros []runtime.Object
	for _, o := range objs {
		ros = append(ros, o)
	}
	client := fake.NewClientset(ros...)
	return client, kubeVIPLBOver(t, client)
}

// kubeVIPLBOver is kubeVIPLB over an existing clientset: a new process
// (a restart, a new leader) learning the assignments from the statuses.
func kubeVIPLBOver(t *testing.T, client *fake.Clientset) *LoadBalancer {
	t.Helper()
	cloud := newTestCloud(t, kubeVIPProbeSection)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	cloud.Initialize(testutil.NewClientBuilder(client), stop)
	factory := informers.NewSharedInformerFactory(client, 0)
	cloud.lb.SetInformers(factory)
	factory.Start(stop)
	return cloud.lb
}

// TestProbeRefusedKubeVIPAnnouncedAddressNotHandedOut: under announce:
// kube-vip, the backend writes the address it assigns to the Service's
// kube-vip.io/loadbalancerIPs annotation, which kube-vip announces; it
// removes it on release (withdraw), but not when the Service is refused.
// Refused, the Service loses its assignment (refused) and the router takes
// the address out of its status (refusedShown), while its annotation,
// which the backend wrote, still has kube-vip announce the address. The
// address is then only "reserved" (requestedAnywhere), which keeps it from
// automatic allocation but not from a Service that requests it: that
// Service is given it, and kube-vip announces one address for two
// Services. Before 5eff0c2 the refused Service kept its assignment and the
// requester was refused (LoadBalancerIPInUse).
func TestProbeRefusedKubeVIPAnnouncedAddressNotHandedOut(t *testing.T) {
	ctx := context.Background()
	client, lb := kubeVIPLB(t, newService("a"))
	services := client.CoreV1().Services("default")
	get := func(name string) *corev1.Service {
		t.Helper()
		s, err := services.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// a is assigned 10.0.0.1; the backend writes it for kube-vip; the
	// controller writes it in the status.
	st, err := lb.EnsureLoadBalancer(ctx, "c1", get("a"), nil)
	if err != nil || ingressIPs(st) != "10.0.0.1" {
		t.Fatalf("EnsureLoadBalancer(a) = %q, %v; want 10.0.0.1", ingressIPs(st), err)
	}
	a := get("a")
	if a.Annotations[kubeVIPLoadBalancerIPs] != "10.0.0.1" || a.Annotations[KubeVIPAnnouncedAnnotation] != "true" {
		t.Fatalf("a's annotations %v; want the backend's kube-vip value 10.0.0.1", a.Annotations)
	}
	a.Status.LoadBalancer = *st
	if _, err := services.UpdateStatus(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's status followed", func() bool {
		lb.mu.Lock()
		defer lb.mu.Unlock()
		h := lb.alloc.holdingOf("default/a")
		return h != nil && len(h.status) == 1
	})

	// The user has a request an address outside the pools: refused.
	a = get("a")
	a.Annotations[string(annotation.LoadBalancerIPs)] = "10.9.9.9"
	if a, err = services.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := lb.EnsureLoadBalancer(ctx, "c1", a, nil); err == nil {
		t.Fatal("EnsureLoadBalancer(a requesting 10.9.9.9) passed; want it refused")
	} else if ue, ok := backends.AsUserError(err); !ok || ue.Reason != ReasonIPNotInPool {
		t.Fatalf("EnsureLoadBalancer(a requesting 10.9.9.9) = %v; want %s", err, ReasonIPNotInPool)
	}
	// The router takes the refused address out of a's status
	// (refusedShown); a's kube-vip annotation stays: kube-vip still
	// announces 10.0.0.1 for a.
	a = get("a")
	a.Status.LoadBalancer.Ingress = nil
	if _, err := services.UpdateStatus(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's cleared status in the informer", func() bool {
		lb.srcMu.Lock()
		idx := lb.byStatus
		lb.srcMu.Unlock()
		obj, ok, _ := idx.GetByKey("default/a")
		return ok && len(obj.(*corev1.Service).Status.LoadBalancer.Ingress) == 0
	})
	time.Sleep(100 * time.Millisecond) // the handler after the index
	if v := get("a").Annotations[kubeVIPLoadBalancerIPs]; v != "10.0.0.1" {
		t.Fatalf("a's kube-vip.io/loadbalancerIPs = %q; the probe expects 10.0.0.1 still (nothing withdraws it on a refusal)", v)
	}

	// b requests 10.0.0.1.
	b := newService("b", withIPs("10.0.0.1"))
	if b, err = services.Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err = lb.EnsureLoadBalancer(ctx, "c1", b, nil)
	if err == nil {
		t.Fatalf("EnsureLoadBalancer(b requesting 10.0.0.1) = %q; want it refused (%s): kube-vip still announces 10.0.0.1 for default/a, whose kube-vip.io/loadbalancerIPs the backend wrote and never withdrew; b's is now %q too",
			ingressIPs(st), ReasonIPInUse, get("b").Annotations[kubeVIPLoadBalancerIPs])
	}
}

// TestProbeRefusedDryRunReleasesNothing (passes; pins down the dry-run
// guard of refused): a refusal under backends.WithDryRun (plan) keeps the
// assignment, and a dry run of another Service does not get the address.
func TestProbeRefusedDryRunReleasesNothing(t *testing.T) {
	lb := newTestLB(t, lbSection)
	ctx := context.Background()
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("a", withIPs("198.51.100.10")), nil); err != nil || ingressIPs(st) != "198.51.100.10" {
		t.Fatalf("EnsureLoadBalancer(a) = %q, %v", ingressIPs(st), err)
	}
	dry, _ := backends.WithDryRun(ctx)
	for _, refused := range []*corev1.Service{
		newService("a", withIPs("10.0.0.1")), // not in a pool
		newService("a", withShared("a b")),   // malformed key
		newService("a", withPool("nope")),    // unknown pool
		newService("a", withIPs("198.51.100.10,2001:db8::1"), withFamilies(corev1.IPFamilyPolicyRequireDualStack, v4, v6), withPool("manual")), // v6 not in the pool named
	} {
		if _, err := lb.EnsureLoadBalancer(dry, "c1", refused, nil); err == nil {
			t.Fatalf("dry EnsureLoadBalancer(%v) passed; want it refused", refused.Annotations)
		}
	}
	if _, exists, _ := lb.GetLoadBalancer(ctx, "c1", newService("a")); !exists {
		t.Fatal("a dry-run refusal released a's assignment")
	}
	if _, err := lb.EnsureLoadBalancer(ctx, "c1", newService("b", withIPs("198.51.100.10")), nil); err == nil {
		t.Fatal("b was given 198.51.100.10, assigned to a, after refusals of a under a dry run")
	}
}

// TestProbeRefusedSharerLeavesPartnerHolding (passes; pins down a refusal
// on a shared address): a sharer refused (a malformed allow-shared-ip)
// and taken out of its status leaves the address with its partner: a
// keyless requester is still refused it, and a Service with the key and
// the refused one's port joins it.
func TestProbeRefusedSharerLeavesPartnerHolding(t *testing.T) {
	lb := newTestLB(t, lbSection)
	ctx := context.Background()
	a := newService("a", withShared("k"), withPorts(80))
	b := newService("b", withShared("k"), withPorts(443))
	for _, s := range []*corev1.Service{a, b} {
		st, err := lb.EnsureLoadBalancer(ctx, "c1", s, nil)
		if err != nil || ingressIPs(st) != "192.0.2.1" {
			t.Fatalf("EnsureLoadBalancer(%s) = %q, %v; want 192.0.2.1", s.Name, ingressIPs(st), err)
		}
		s.Status.LoadBalancer = *st
		lb.onChange(s) // the informer
	}
	bad := newService("a", withShared("a b"), withPorts(80), withStatus("192.0.2.1"))
	if _, err := lb.EnsureLoadBalancer(ctx, "c1", bad, nil); err == nil {
		t.Fatal("EnsureLoadBalancer(a with a malformed key) passed")
	}
	bad.Status.LoadBalancer.Ingress = nil
	lb.onChange(bad) // the router took it out of a's status
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("c", withIPs("192.0.2.1")), nil); err == nil {
		t.Fatalf("EnsureLoadBalancer(c, keyless, requesting 192.0.2.1) = %q; want it refused: b still holds it", ingressIPs(st))
	}
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("d", withShared("k"), withPorts(80)), nil); err != nil || ingressIPs(st) != "192.0.2.1" {
		t.Errorf("EnsureLoadBalancer(d, key k, port 80) = %q, %v; want 192.0.2.1, shared with b (a's port is free)", ingressIPs(st), err)
	}
}

// TestProbeRefusedKubeVIPAddressAfterRestart: as
// TestProbeRefusedKubeVIPAnnouncedAddressNotHandedOut, across a restart
// (or a new leader): the new process learns the assignments from the
// statuses, and the refused Service's status no longer shows the address
// kube-vip still announces for it (its backend-written
// kube-vip.io/loadbalancerIPs): the address is only reserved, and a
// Service requesting it is given it. Fails before and after a1ca2c9 (which
// keeps the address assigned in the process that refused): the
// announced address is not taken from the annotation.
func TestProbeRefusedKubeVIPAddressAfterRestart(t *testing.T) {
	ctx := context.Background()
	client, lb := kubeVIPLB(t, newService("a"))
	services := client.CoreV1().Services("default")
	st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("a"), nil)
	if err != nil || ingressIPs(st) != "10.0.0.1" {
		t.Fatalf("EnsureLoadBalancer(a) = %q, %v; want 10.0.0.1", ingressIPs(st), err)
	}
	a, err := services.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Annotations[kubeVIPLoadBalancerIPs] != "10.0.0.1" || a.Annotations[KubeVIPAnnouncedAnnotation] != "true" {
		t.Fatalf("a's annotations %v; want the backend's kube-vip value 10.0.0.1", a.Annotations)
	}
	// a asks for an address outside the pools (refused), and the router
	// leaves its status empty; its kube-vip value stays.
	a.Annotations[string(annotation.LoadBalancerIPs)] = "10.9.9.9"
	if _, err := services.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	restarted := kubeVIPLBOver(t, client)
	b, err := services.Create(ctx, newService("b", withIPs("10.0.0.1")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := restarted.EnsureLoadBalancer(ctx, "c1", b, nil); err == nil {
		t.Fatalf("after a restart, EnsureLoadBalancer(b requesting 10.0.0.1) = %q; want it refused: kube-vip still announces 10.0.0.1 for default/a (its kube-vip.io/loadbalancerIPs, written by the backend)", ingressIPs(st))
	}
}
