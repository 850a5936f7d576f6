package router

import (
	"context"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// countingTargeter is a targeter that counts the router's CanTarget
// questions.
type countingTargeter struct {
	targeter
	asked *atomic.Int64
}

func (t countingTargeter) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return t, true }

func (t countingTargeter) CanTarget(svc *corev1.Service, n *corev1.Node) bool {
	t.asked.Add(1)
	return t.targeter.CanTarget(svc, n)
}

// namesByBackend is a LoadBalancerTargetsByBackend answer as node names.
func namesByBackend(by map[string][]*corev1.Node) map[string][]string {
	out := map[string][]string{}
	for b, ns := range by {
		out[b] = nodeNames(ns)
	}
	return out
}

// TestLoadBalancerTargetsEnsured: after an EnsureLoadBalancer under a
// decision, LoadBalancerTargetsEnsured gives LoadBalancerTargetsByBackend's
// answer for the Service as the caller then holds it, from what the call
// handed the backend (no CanTarget) when the nodes are the same list and
// the Service differs only in what the router writes (its annotations,
// the status); else it asks the backend again (issue 42).
func TestLoadBalancerTargetsEnsured(t *testing.T) {
	var asked atomic.Int64
	ips := countingTargeter{targeter{newLBCloud("ips", "198.51.100.1")}, &asked}
	r := mustRouter(t, testConfig(), Backend{Name: "ips", Scheme: "aws", Cloud: ips})
	nodes := []*corev1.Node{
		newNode("a", withInternalIP("10.0.0.1")),
		newNode("b", withProviderID("aws:///z/i-1")),
		newNode("c", withInternalIP("10.0.0.3")),
	}
	svc := newService("s", withLBBackend("ips"))
	ctx, dec := DecisionForWrite(context.Background())
	status, err := r.EnsureLoadBalancer(ctx, cluster, svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if got := asked.Swap(0); got != int64(len(nodes)) {
		t.Fatalf("EnsureLoadBalancer asked CanTarget %d times, want %d", got, len(nodes))
	}
	edited := func(f func(*corev1.Service)) *corev1.Service {
		s := svc.DeepCopy()
		f(s)
		return s
	}
	published := edited(func(s *corev1.Service) {
		s.Status.LoadBalancer = *status
		s.ResourceVersion = "7"
		s.Annotations[string(annotation.LoadBalancerServedBy)] = "ips"
		s.Annotations[string(annotation.LoadBalancerID)] = "lb-1"
		s.Annotations[string(annotation.LoadBalancerBackends)] = "ips"
	})
	for _, tc := range []struct {
		name   string
		dec    *Decision
		svc    *corev1.Service
		nodes  []*corev1.Node
		handed bool
	}{
		{"the Service and nodes handed", dec, svc, nodes, true},
		{"the Service as published", dec, published, nodes, true},
		{"no decision", nil, published, nodes, false},
		{"another decision", &Decision{}, published, nodes, false},
		{"a copy of the node list", dec, published, slices.Clone(nodes), false},
		{"another node list", dec, published, nodes[:2], false},
		{"a user's annotation changed", dec, edited(func(s *corev1.Service) { s.Annotations["example.com/x"] = "y" }), nodes, false},
		{"a target-node-labels annotation", dec, edited(func(s *corev1.Service) {
			s.Annotations["service.beta.kubernetes.io/aws-load-balancer-target-node-labels"] = "pool=web"
		}), nodes, false},
		{"the spec changed", dec, edited(func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }), nodes, false},
		{"a label changed", dec, edited(func(s *corev1.Service) { s.Labels = map[string]string{"app": "x"} }), nodes, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := namesByBackend(r.LoadBalancerTargetsByBackend(tc.svc, tc.nodes))
			asked.Store(0)
			got := namesByBackend(r.LoadBalancerTargetsEnsured(tc.dec, tc.svc, tc.nodes))
			if !maps.EqualFunc(got, want, slices.Equal) {
				t.Errorf("targets %v, LoadBalancerTargetsByBackend's %v", got, want)
			}
			wantAsked := int64(len(tc.nodes))
			if tc.handed {
				wantAsked = 0
			}
			if n := asked.Load(); n != wantAsked {
				t.Errorf("CanTarget asked %d times, want %d (answered from what the call handed: %v)", n, wantAsked, tc.handed)
			}
		})
	}
}
