package aws

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRegionalIDAllocatesNothing: the backend parses the providerID of
// every node it is handed on every EnsureLoadBalancer (1,000 targets per
// NLB in the 5,000-node cell); a valid one costs no allocation (one split
// each before).
func TestRegionalIDAllocatesNothing(t *testing.T) {
	l := &LoadBalancer{settings: &Settings{Region: "eu-west-1"}}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{ProviderID: "aws:///eu-west-1a/i-0123456789abcdef0"}}
	if id := l.regionalID(n); id != "i-0123456789abcdef0" {
		t.Fatalf("regionalID = %q", id)
	}
	if allocs := testing.AllocsPerRun(100, func() { l.regionalID(n) }); allocs != 0 {
		t.Errorf("regionalID allocates %.0f times a node, want 0", allocs)
	}
}
