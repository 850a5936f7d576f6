package baremetal

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestProbeRefusedKubeVIPAddressFreedByRelease (review of a1ca2c9 and
// b12ad35; passing, pins the release): after a restart, a refused
// Service's backend-written kube-vip value holds its address (observe);
// its release (EnsureLoadBalancerDeleted: withdraw removes the value)
// must free it, once the informer sees the value gone, for a Service
// requesting it. Held for ever, the address would leak: nothing else
// removes a backend-written value.
func TestProbeRefusedKubeVIPAddressFreedByRelease(t *testing.T) {
	ctx := context.Background()
	client, lb := kubeVIPLB(t, newService("a"))
	services := client.CoreV1().Services("default")
	if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("a"), nil); err != nil || ingressIPs(st) != "10.0.0.1" {
		t.Fatalf("EnsureLoadBalancer(a) = %q, %v; want 10.0.0.1", ingressIPs(st), err)
	}
	a, err := services.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Annotations[string(annotation.LoadBalancerIPs)] = "10.9.9.9"
	if a, err = services.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	restarted := kubeVIPLBOver(t, client)
	b, err := services.Create(ctx, newService("b", withIPs("10.0.0.1")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := restarted.EnsureLoadBalancer(ctx, "c1", b, nil); err == nil {
		t.Fatalf("EnsureLoadBalancer(b) = %q while a's kube-vip value announces 10.0.0.1; want refused", ingressIPs(st))
	}
	if err := restarted.EnsureLoadBalancerDeleted(ctx, "c1", a); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := restarted.EnsureLoadBalancer(ctx, "c1", b, nil)
		if err == nil && ingressIPs(st) == "10.0.0.1" {
			return
		}
		if time.Now().After(deadline) {
			cur, _ := services.Get(ctx, "a", metav1.GetOptions{})
			t.Fatalf("after a's release, EnsureLoadBalancer(b requesting 10.0.0.1) = %q, %v; a's annotations %v", ingressIPs(st), err, fmt.Sprint(cur.Annotations))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
