package foundation

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const (
	ns = "default"
	// cleanupFinalizer is the finalizer upstream's service controller puts
	// on Services it made a load balancer for.
	cleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"
)

var (
	metalPool  = netip.MustParsePrefix("192.0.2.0/28")
	metal2Pool = netip.MustParsePrefix("198.51.100.0/28")
)

// oneIngressIn holds once the Service has exactly one ingress IP, inside
// pool, and the cleanup finalizer.
func oneIngressIn(pool netip.Prefix) framework.ServiceCondition {
	return func(s *corev1.Service) (bool, string) {
		ips := framework.IngressIPs(s)
		seen := fmt.Sprintf("ingress %v, finalizers %v", ips, s.Finalizers)
		if len(ips) != 1 || !framework.HasFinalizer(s, cleanupFinalizer) {
			return false, seen
		}
		ip, err := netip.ParseAddr(ips[0])
		return err == nil && pool.Contains(ip), seen
	}
}

// ingressIs holds once the Service's only ingress IP is ip.
func ingressIs(ip string) framework.ServiceCondition {
	return func(s *corev1.Service) (bool, string) {
		ips := framework.IngressIPs(s)
		return len(ips) == 1 && ips[0] == ip, fmt.Sprintf("ingress %v", ips)
	}
}

func createService(ctx context.Context, t *testing.T, name string, tweaks ...framework.ServiceTweak) {
	t.Helper()
	cp := suite.ControlPlane(t)
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(ns, name, tweaks...)); err != nil {
		t.Fatal(err)
	}
}

func ingressOf(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	s, err := suite.ControlPlane(t).Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ips := framework.IngressIPs(s); len(ips) == 1 {
		return ips[0]
	}
	t.Fatalf("service %s: ingress %v, want one address", name, s.Status.LoadBalancer.Ingress)
	return ""
}

func TestLoadBalancerService(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tweaks []framework.ServiceTweak
		want   framework.ServiceCondition
	}{
		{name: "default backend", want: oneIngressIn(metalPool)},
		{name: "annotated backend", want: oneIngressIn(metal2Pool),
			tweaks: []framework.ServiceTweak{framework.WithAnnotation(string(annotation.LoadBalancerBackend), "metal2")}},
		{name: "requested address", want: ingressIs("192.0.2.70"),
			tweaks: []framework.ServiceTweak{framework.WithAnnotation(string(annotation.LoadBalancerIPs), "192.0.2.70")}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp, _ := shared(t)
			ctx := ctxFor(t)
			name := fmt.Sprintf("lb-%d", i)
			createService(ctx, t, name, tt.tweaks...)
			framework.Eventually(t, settle, name+" load balancer", framework.ServiceMatches(cp.Client, ns, name, tt.want))
			framework.Eventually(t, settle, "EnsuredLoadBalancer event",
				framework.EventSeen(cp.Client, "Service", ns, name, corev1.EventTypeNormal, "EnsuredLoadBalancer"))
			s, err := cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !framework.HasFinalizer(s, cleanupFinalizer) {
				t.Errorf("finalizers %v, want %s", s.Finalizers, cleanupFinalizer)
			}
		})
	}
}

func TestLoadBalancerServiceBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tweaks []framework.ServiceTweak
	}{
		{"unknown backend", []framework.ServiceTweak{framework.WithAnnotation(string(annotation.LoadBalancerBackend), "nosuch")}},
		{"requested address outside every pool", []framework.ServiceTweak{framework.WithAnnotation(string(annotation.LoadBalancerIPs), "203.0.113.5")}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp, _ := shared(t)
			ctx := ctxFor(t)
			name := fmt.Sprintf("bad-%d", i)
			createService(ctx, t, name, tt.tweaks...)
			framework.Eventually(t, settle, "a Warning event on "+name,
				framework.EventSeen(cp.Client, "Service", ns, name, corev1.EventTypeWarning, ""))
			s, err := cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ips := framework.IngressIPs(s); len(ips) != 0 {
				t.Errorf("ingress %v, want none for bad input", ips)
			}
		})
	}
}

// TestLoadBalancerDeleted checks that deleting a Service removes its
// finalizer, the object, and the address: a new Service asking for the
// same address gets it.
func TestLoadBalancerDeleted(t *testing.T) {
	t.Parallel()
	cp, _ := shared(t)
	ctx := ctxFor(t)
	const ip = "192.0.2.72"
	createService(ctx, t, "del-1", framework.WithAnnotation(string(annotation.LoadBalancerIPs), ip))
	framework.Eventually(t, settle, "del-1 load balancer", framework.ServiceMatches(cp.Client, ns, "del-1", ingressIs(ip)))
	framework.Eventually(t, settle, "del-1 finalizer", framework.ServiceMatches(cp.Client, ns, "del-1", func(s *corev1.Service) (bool, string) {
		return framework.HasFinalizer(s, cleanupFinalizer), fmt.Sprint(s.Finalizers)
	}))

	if err := cp.Client.CoreV1().Services(ns).Delete(ctx, "del-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "del-1 gone", framework.ServiceGone(cp.Client, ns, "del-1"))

	createService(ctx, t, "del-2", framework.WithAnnotation(string(annotation.LoadBalancerIPs), ip))
	framework.Eventually(t, settle, "del-2 reuses "+ip, framework.ServiceMatches(cp.Client, ns, "del-2", ingressIs(ip)))
}

// TestLoadBalancerMovesBetweenBackends changes the backend annotation: the
// load balancer moves to metal2 and its metal address is free again.
func TestLoadBalancerMovesBetweenBackends(t *testing.T) {
	t.Parallel()
	cp, _ := shared(t)
	ctx := ctxFor(t)
	const ip = "192.0.2.73"
	createService(ctx, t, "mover", framework.WithAnnotation(string(annotation.LoadBalancerIPs), ip))
	framework.Eventually(t, settle, "mover on metal", framework.ServiceMatches(cp.Client, ns, "mover", ingressIs(ip)))

	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"metal2",%q:null}}}`, annotation.LoadBalancerBackend, annotation.LoadBalancerIPs)
	if _, err := cp.Client.CoreV1().Services(ns).Patch(ctx, "mover", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "mover on metal2", framework.ServiceMatches(cp.Client, ns, "mover", oneIngressIn(metal2Pool)))

	createService(ctx, t, "mover-old-ip", framework.WithAnnotation(string(annotation.LoadBalancerIPs), ip))
	framework.Eventually(t, settle, "the old address is free in metal", framework.ServiceMatches(cp.Client, ns, "mover-old-ip", ingressIs(ip)))
}

// TestSharedAddress gives two Services with the same allow-shared-ip key
// and different ports one address.
func TestSharedAddress(t *testing.T) {
	t.Parallel()
	cp, _ := shared(t)
	ctx := ctxFor(t)
	const ip = "192.0.2.74"
	createService(ctx, t, "share-http", framework.WithAnnotation(string(annotation.AllowSharedIP), "front"),
		framework.WithAnnotation(string(annotation.LoadBalancerIPs), ip))
	createService(ctx, t, "share-dns", framework.WithAnnotation(string(annotation.AllowSharedIP), "front"),
		framework.WithAnnotation(string(annotation.LoadBalancerIPs), ip), framework.WithPort("dns", 53, corev1.ProtocolUDP))
	for _, name := range []string{"share-http", "share-dns"} {
		framework.Eventually(t, settle, name+" on "+ip, framework.ServiceMatches(cp.Client, ns, name, ingressIs(ip)))
	}
}
