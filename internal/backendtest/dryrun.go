package backendtest

import (
	"context"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// dryRunMakesNoMutatingCall is the contract of the read-only mode
// (backends.WithDryRun) that `multicloud-ccm plan` runs the backends in:
// under a dry run, a create, a change and a delete make no mutating call
// and leave the cloud as it was, while each one reports what it would do
// (at least one intent); with nothing to change it reports nothing.
func dryRunMakesNoMutatingCall(t *testing.T, s *suite) {
	h := s.f.LoadBalancers
	svc, nodes := h.Service(t), h.Nodes(t)
	before := h.Mutations()
	intents := s.dryRun(t, "EnsureLoadBalancer of a new Service", func(ctx context.Context) error {
		_, err := s.lb.EnsureLoadBalancer(ctx, clusterName, svc.DeepCopy(), nodes)
		return err
	})
	if len(intents) == 0 {
		t.Errorf("a dry-run EnsureLoadBalancer(%s) of a new Service reported no intent: the plan would say nothing is created", svc.Name)
	}
	s.noMutation(t, before, "a dry-run EnsureLoadBalancer of a new Service")
	if s.get(t, svc) {
		t.Fatalf("GetLoadBalancer(%s) reports a load balancer after a dry-run Ensure", svc.Name)
	}

	s.ensure(t, svc, nodes)
	before = h.Mutations()
	if intents := s.dryRun(t, "EnsureLoadBalancer with nothing changed", func(ctx context.Context) error {
		_, err := s.lb.EnsureLoadBalancer(ctx, clusterName, svc.DeepCopy(), nodes)
		return err
	}); len(intents) != 0 {
		t.Errorf("a dry-run EnsureLoadBalancer(%s) with nothing changed reported %v, want nothing", svc.Name, intents)
	}
	// A port added is a change for a backend that makes listeners, none
	// for an address allocator: either way it is made by nobody.
	changed := withExtraPort(svc)
	s.dryRun(t, "EnsureLoadBalancer with a port added", func(ctx context.Context) error {
		_, err := s.lb.EnsureLoadBalancer(ctx, clusterName, changed, nodes)
		return err
	})
	deleteIntents := s.dryRun(t, "EnsureLoadBalancerDeleted", func(ctx context.Context) error {
		return s.lb.EnsureLoadBalancerDeleted(ctx, clusterName, svc.DeepCopy())
	})
	if len(deleteIntents) == 0 {
		t.Errorf("a dry-run EnsureLoadBalancerDeleted(%s) reported no intent", svc.Name)
	}
	s.noMutation(t, before, "dry-run Ensures and a dry-run delete of an existing load balancer")
	if !s.get(t, svc) {
		t.Fatalf("GetLoadBalancer(%s) reports no load balancer after a dry-run delete", svc.Name)
	}
	s.deleteAll(t, svc)
}

// dryRun runs op under a dry run, failing the test on an error, and
// returns the intents it recorded.
func (s *suite) dryRun(t *testing.T, what string, op func(ctx context.Context) error) []backends.Intent {
	t.Helper()
	ctx, intents := backends.WithDryRun(s.ctx)
	if err := op(ctx); err != nil {
		t.Fatalf("dry-run %s: %v", what, err)
	}
	t.Logf("dry-run %s: %v", what, intents())
	return intents()
}

func (s *suite) noMutation(t *testing.T, before int, what string) {
	t.Helper()
	if n := s.f.LoadBalancers.Mutations() - before; n != 0 {
		t.Errorf("%s made %d mutating calls, want 0", what, n)
	}
}
