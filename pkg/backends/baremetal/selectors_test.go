package baremetal

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/testutil"
)

// selectorSection has MetalLB-style service allocations: a premium pool
// for Services labelled tier=premium, a pool for namespaces labelled
// team=blue, two more pools ordered by priority, and a pool without allocation
// listed first (tried last).
const selectorSection = `
addressPools:
- name: general
  addresses: ["192.0.2.0/30"]
- name: low
  addresses: ["192.0.2.8/31"]
  priority: 20
- name: high
  addresses: ["192.0.2.12/31"]
  priority: 10
- name: premium
  addresses: ["198.51.100.0/30"]
  serviceSelectors: [{matchLabels: {tier: premium}}]
  priority: 1
- name: blue
  addresses: ["203.0.113.0/30"]
  namespaceSelectors: [{matchExpressions: [{key: team, operator: In, values: [blue]}]}]
  priority: 5
`

func withLabels(kv ...string) svcTweak {
	return func(s *corev1.Service) {
		s.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Labels[kv[i]] = kv[i+1]
		}
	}
}

// TestServiceAllocation: selectors and priorities choose the pool as
// MetalLB's serviceAllocation does.
func TestServiceAllocation(t *testing.T) {
	c := newTestCloud(t, selectorSection)
	lb := c.lb
	lb.Seed(nil)
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "blue-ns", Labels: map[string]string{"team": "blue"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
	)
	lb.setClient(client)
	ctx := context.Background()
	ensure := func(svc *corev1.Service) string {
		t.Helper()
		st, err := lb.EnsureLoadBalancer(ctx, "c", svc, nil)
		if err != nil {
			t.Fatalf("ensure %s: %v", svc.Name, err)
		}
		return st.Ingress[0].IP
	}
	for _, tc := range []struct {
		svc  *corev1.Service
		want string
	}{
		{newService("premium-1", withLabels("tier", "premium")), "198.51.100.1"},
		{newService("blue-1", withNamespace("blue-ns")), "203.0.113.1"},
		{newService("plain-1"), "192.0.2.12"}, // priority 10 before 20, both before general
		{newService("plain-2"), "192.0.2.13"},
		{newService("plain-3"), "192.0.2.8"},
		{newService("plain-4"), "192.0.2.9"},
		{newService("plain-5"), "192.0.2.1"}, // then the pool without allocation
	} {
		if got := ensure(tc.svc); got != tc.want {
			t.Errorf("%s/%s got %s, want %s", tc.svc.Namespace, tc.svc.Name, got, tc.want)
		}
	}
	_, err := lb.EnsureLoadBalancer(ctx, "c", newService("not-premium", withPool("premium")), nil)
	if err == nil || !strings.Contains(err.Error(), `serves only Services labelled "tier=premium"`) {
		t.Errorf("a Service without the label naming the premium pool: %v", err)
	}
	_, err = lb.EnsureLoadBalancer(ctx, "c", newService("not-blue", withPool("blue")), nil)
	if err == nil || !strings.Contains(err.Error(), `serves only namespaces labelled "team in (blue)"`) {
		t.Errorf("a Service outside the blue namespaces naming the blue pool: %v", err)
	}

	// Per-pool metrics, per family (MetalLB's names end in _total on
	// gauges; the names are kept for dashboards).
	for pool, want := range map[string]float64{"blue": 1, "general": 1, "high": 2, "low": 2, "premium": 1} {
		if got, _ := testutil.GetGaugeMetricValue(addressesInUse.WithLabelValues("metal", pool, "IPv4")); got != want {
			t.Errorf("pool %s in use = %v, want %v", pool, got, want)
		}
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, "c", newService("plain-1")); err != nil {
		t.Fatal(err)
	}
	if got, _ := testutil.GetGaugeMetricValue(addressesInUse.WithLabelValues("metal", "high", "IPv4")); got != 1 {
		t.Errorf("pool high in use after a release = %v, want 1", got)
	}
	if got, _ := testutil.GetGaugeMetricValue(addressesTotal.WithLabelValues("metal", "general", "IPv4")); got != 2 {
		t.Errorf("pool general total = %v, want 2 (a /30 less network and broadcast)", got)
	}
}
