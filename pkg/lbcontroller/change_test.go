package lbcontroller

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOwnDrainWritesAreNoChange: the router's drain annotations
// (load-balancer-draining, load-balancer-dns-target) and external-dns's
// target annotation while it says what the router recorded are the CCM's
// own writes, so no sync follows them; a target annotation the user set or
// changed is a change.
func TestOwnDrainWritesAreNoChange(t *testing.T) {
	const (
		draining = "multicloud-ccm.io/load-balancer-draining"
		mark     = "multicloud-ccm.io/load-balancer-dns-target"
		alpha    = "external-dns.alpha.kubernetes.io/target"
		ga       = "external-dns.kubernetes.io/target"
	)
	base := map[string]string{"multicloud-ccm.io/load-balancer-backend": "aws"}
	with := func(kv ...string) map[string]string {
		out := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	svc := func(ann map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u1", Annotations: ann}}
	}
	for _, tc := range []struct {
		name     string
		old, cur map[string]string
		want     bool
	}{
		{"drain recorded with the router's target", base, with(draining, "metal=2026-11-27T10:05:00Z", alpha, "lb.example", ga, "lb.example", mark, "lb.example"), false},
		{"drain over, the router's target removed", with(draining, "metal=2026-11-27T10:05:00Z", alpha, "lb.example", ga, "lb.example", mark, "lb.example"), base, false},
		{"the user's target added", base, with(alpha, "web.example.com"), true},
		{"the user changed the router's target", with(alpha, "lb.example", mark, "lb.example"), with(alpha, "web.example.com", mark, "lb.example"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := relevantChange(svc(tc.old), svc(tc.cur)); got != tc.want {
				t.Errorf("relevantChange = %v, want %v", got, tc.want)
			}
		})
	}
}
