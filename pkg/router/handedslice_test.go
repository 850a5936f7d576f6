package router

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// compactingTargeter is a targeter whose EnsureLoadBalancer filters the
// nodes it is handed in place (keeping those with a providerID), as a
// backend may do with its own argument: upstream's service controller
// hands each call a list it builds for it, and nothing in the
// cloudprovider contract forbids a provider reusing it.
type compactingTargeter struct{ targeter }

func (t compactingTargeter) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return t, true }

func (t compactingTargeter) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	kept := nodes[:0]
	for _, n := range nodes {
		if n.Spec.ProviderID != "" {
			kept = append(kept, n)
		}
	}
	return t.targeter.EnsureLoadBalancer(ctx, clusterName, svc, kept)
}

// TestHandedSliceReusedByTheBackend (review probe s57 of 58d491a, latent):
// the decision kept the very slice the call handed the backend, and
// LoadBalancerTargetsEnsured answered with it. A backend that reuses its
// argument (filters or rewrites it in place) changed the fingerprint:
// here [a b c] handed, compacted to [b c c] by the backend, remembered as
// {b, c}, while LoadBalancerTargetsByBackend (targetsOf) says {a, b, c}.
// No backend of this repository does so today (grep: none reuses its
// nodes); before 58d491a the fingerprint never read a slice a backend
// was handed. The decision now keeps a copy (lifecycle's Decision.hand).
func TestHandedSliceReusedByTheBackend(t *testing.T) {
	r := mustRouter(t, testConfig(), Backend{Name: "ips", Scheme: "aws", Cloud: compactingTargeter{targeter{newLBCloud("ips", "198.51.100.1")}}})
	nodes := []*corev1.Node{
		newNode("a", withInternalIP("10.0.0.1")),
		newNode("b", withInternalIP("10.0.0.2"), withProviderID("aws:///z/i-2")),
		newNode("c", withInternalIP("10.0.0.3"), withProviderID("aws:///z/i-3")),
	}
	svc := newService("s", withLBBackend("ips"))
	ctx, dec := DecisionForWrite(context.Background())
	if _, err := r.EnsureLoadBalancer(ctx, cluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	want := namesByBackend(r.LoadBalancerTargetsByBackend(svc, nodes))
	got := namesByBackend(r.LoadBalancerTargetsEnsured(dec, svc, nodes))
	for b := range got {
		got[b] = slices.Compact(slices.Sorted(slices.Values(got[b])))
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("ensured targets %v, LoadBalancerTargetsByBackend's %v", got, want)
	}
}
