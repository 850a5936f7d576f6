package backendtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"
)

var loadBalancerClauses = []clause{
	{"lifecycle", lifecycle},
	{"steady state makes no mutating call", steadyState},
	{"crash between creation steps leaves one load balancer", crashDuringCreate},
	{"crash between deletion steps is still seen", crashDuringDelete},
	{"update never creates", updateNeverCreates},
	{"a create is converged", convergedByCreate},
	{"strangers are never changed or deleted", strangersUntouched},
	{"a dry run makes no mutating call", dryRunMakesNoMutatingCall},
}

// ensure calls EnsureLoadBalancer until it succeeds (a load balancer may
// take a while to provision) or the fixture's provision time has passed.
func (s *suite) ensure(t *testing.T, svc *corev1.Service, nodes []*corev1.Node) *corev1.LoadBalancerStatus {
	t.Helper()
	var status *corev1.LoadBalancerStatus
	err := poll(s.ctx, s.f.Provision, func() error {
		var err error
		status, err = s.lb.EnsureLoadBalancer(s.ctx, clusterName, svc.DeepCopy(), nodes)
		if err == nil && status == nil {
			t.Fatalf("EnsureLoadBalancer(%s) returned no status and no error", svc.Name)
		}
		if err != nil {
			time.Sleep(450 * time.Millisecond)
		}
		return err
	})
	if err != nil {
		t.Fatalf("EnsureLoadBalancer(%s) still failing after %v: %v", svc.Name, s.f.Provision, err)
	}
	return status
}

// get asks GetLoadBalancer, failing the test on an error.
func (s *suite) get(t *testing.T, svc *corev1.Service) bool {
	t.Helper()
	_, exists, err := s.lb.GetLoadBalancer(s.ctx, clusterName, svc.DeepCopy())
	if err != nil {
		t.Fatalf("GetLoadBalancer(%s): %v", svc.Name, err)
	}
	return exists
}

// deleteAll deletes the Service's load balancer, retrying like the service
// controller does, and checks that nothing is left.
func (s *suite) deleteAll(t *testing.T, svc *corev1.Service) {
	t.Helper()
	err := poll(s.ctx, s.f.Provision, func() error {
		err := s.lb.EnsureLoadBalancerDeleted(s.ctx, clusterName, svc.DeepCopy())
		if err != nil {
			time.Sleep(450 * time.Millisecond)
		}
		return err
	})
	if err != nil {
		t.Fatalf("EnsureLoadBalancerDeleted(%s): %v", svc.Name, err)
	}
	if lbs, parts := s.f.LoadBalancers.Parts(t, svc); lbs != 0 || parts != 0 {
		t.Fatalf("after EnsureLoadBalancerDeleted(%s) the cloud still holds %d load balancers and %d parts", svc.Name, lbs, parts)
	}
	if s.get(t, svc) {
		t.Fatalf("GetLoadBalancer(%s) reports exists after the delete", svc.Name)
	}
}

// checkSeen fails the test when parts of the Service's load balancer are
// left in the cloud but GetLoadBalancer says there is none: the service
// controller would then skip the delete, and the parts would leak.
func (s *suite) checkSeen(t *testing.T, svc *corev1.Service, when string) {
	t.Helper()
	// GetLoadBalancer first: the cloud may finish a delete between the two
	// reads, but no part appears by itself.
	seen := s.get(t, svc)
	lbs, parts := s.f.LoadBalancers.Parts(t, svc)
	if parts > 0 && !seen {
		t.Fatalf("%s: the cloud holds %d load balancers and %d parts for %s, but GetLoadBalancer reports none (the delete would be skipped and they would leak)", when, lbs, parts, svc.Name)
	}
}

func lifecycle(t *testing.T, s *suite) {
	h := s.f.LoadBalancers
	svc, nodes := h.Service(t), h.Nodes(t)
	if s.get(t, svc) {
		t.Fatalf("GetLoadBalancer(%s) reports a load balancer before any Ensure", svc.Name)
	}
	status := s.ensure(t, svc, nodes)
	if len(status.Ingress) == 0 {
		t.Errorf("EnsureLoadBalancer(%s) returned a status with no ingress", svc.Name)
	}
	if !s.get(t, svc) {
		t.Fatalf("GetLoadBalancer(%s) reports no load balancer after Ensure", svc.Name)
	}
	if lbs, _ := h.Parts(t, svc); lbs != 1 {
		t.Fatalf("after Ensure the cloud holds %d load balancers for %s, want 1", lbs, svc.Name)
	}
	s.deleteAll(t, svc)
	before := h.Mutations()
	if err := s.lb.EnsureLoadBalancerDeleted(s.ctx, clusterName, svc.DeepCopy()); err != nil {
		t.Fatalf("a second EnsureLoadBalancerDeleted(%s): %v; it must be idempotent", svc.Name, err)
	}
	if n := h.Mutations() - before; n != 0 {
		t.Errorf("a second EnsureLoadBalancerDeleted(%s) made %d mutating calls, want 0", svc.Name, n)
	}
}

func steadyState(t *testing.T, s *suite) {
	h := s.f.LoadBalancers
	svc, nodes := h.Service(t), h.Nodes(t)
	s.ensure(t, svc, nodes)
	before := h.Mutations()
	s.ensure(t, svc, nodes)
	if err := s.lb.UpdateLoadBalancer(s.ctx, clusterName, svc.DeepCopy(), nodes); err != nil {
		t.Fatalf("UpdateLoadBalancer(%s): %v", svc.Name, err)
	}
	if _, _, err := s.lb.GetLoadBalancer(s.ctx, clusterName, svc.DeepCopy()); err != nil {
		t.Fatalf("GetLoadBalancer(%s): %v", svc.Name, err)
	}
	if n := h.Mutations() - before; n != 0 {
		t.Errorf("EnsureLoadBalancer and UpdateLoadBalancer with nothing changed made %d mutating calls, want 0", n)
	}
	s.deleteAll(t, svc)
}

// createCost is how many mutating calls one full create of a new Service
// makes; the Service is deleted again.
func (s *suite) createCost(t *testing.T) int {
	t.Helper()
	h := s.f.LoadBalancers
	svc := h.Service(t)
	before := h.Mutations()
	s.ensure(t, svc, h.Nodes(t))
	n := h.Mutations() - before
	s.deleteAll(t, svc)
	return n
}

// crashDuringCreate fails the create after every step in turn: whatever
// was made must be seen by GetLoadBalancer, and the next Ensures must end
// with exactly one load balancer, which the delete removes whole.
func crashDuringCreate(t *testing.T, s *suite) {
	h := s.f.LoadBalancers
	skipUnless(t, h.FailMutationsAfter != nil, "FailMutationsAfter")
	steps := s.createCost(t)
	if steps == 0 {
		t.Skip("a create makes no mutating call: nothing can crash between steps")
	}
	t.Logf("a create takes %d mutating calls", steps)
	for n := range steps {
		svc := h.Service(t)
		restore := h.FailMutationsAfter(t, n)
		err := s.whileRetry(func() error {
			_, err := s.lb.EnsureLoadBalancer(s.ctx, clusterName, svc.DeepCopy(), h.Nodes(t))
			return err
		})
		restore()
		if err == nil {
			t.Logf("crash after %d steps: Ensure still succeeded", n)
		}
		s.checkSeen(t, svc, fmt.Sprintf("after a create that failed after %d steps", n))
		s.ensure(t, svc, h.Nodes(t))
		if lbs, _ := h.Parts(t, svc); lbs != 1 {
			t.Fatalf("a create that failed after %d steps, then Ensure: the cloud holds %d load balancers for %s, want 1", n, lbs, svc.Name)
		}
		s.deleteAll(t, svc)
	}
}

// crashDuringDelete fails the delete after every step in turn: while any
// part is left, GetLoadBalancer must report the load balancer.
func crashDuringDelete(t *testing.T, s *suite) {
	h := s.f.LoadBalancers
	skipUnless(t, h.FailMutationsAfter != nil, "FailMutationsAfter")
	for n := 0; ; n++ {
		svc := h.Service(t)
		s.ensure(t, svc, h.Nodes(t))
		restore := h.FailMutationsAfter(t, n)
		err := s.whileRetry(func() error { return s.lb.EnsureLoadBalancerDeleted(s.ctx, clusterName, svc.DeepCopy()) })
		restore()
		s.checkSeen(t, svc, fmt.Sprintf("after a delete that failed after %d steps", n))
		s.deleteAll(t, svc)
		if err == nil {
			return // the delete took at most n steps: every crash point is covered
		}
		if n > 50 {
			t.Fatal("a delete kept failing after 50 steps")
		}
	}
}

// whileRetry calls op again while it asks to be retried (api.RetryError: a
// backend that makes one change per call and waits for the cloud), so that
// a crash after n steps is reached by backends of either kind. It returns
// op's first other answer.
func (s *suite) whileRetry(op func() error) error {
	deadline := time.Now().Add(s.f.Provision)
	for {
		err := op()
		var re *api.RetryError
		if !errors.As(err, &re) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// updateNeverCreates calls UpdateLoadBalancer for a Service that has no
// load balancer, as upstream's node sync does for a Service whose delete has
// just finished: nothing may be made, or it would never be deleted.
func updateNeverCreates(t *testing.T, s *suite) {
	h := s.f.LoadBalancers
	svc := h.Service(t)
	before := h.Mutations()
	err := s.lb.UpdateLoadBalancer(s.ctx, clusterName, svc.DeepCopy(), h.Nodes(t))
	lbs, parts := h.Parts(t, svc)
	if lbs != 0 || parts != 0 {
		t.Fatalf("UpdateLoadBalancer(%s) of a Service with no load balancer (err %v) left %d load balancers and %d parts in the cloud", svc.Name, err, lbs, parts)
	}
	if n := h.Mutations() - before; n != 0 {
		t.Errorf("UpdateLoadBalancer(%s) of a Service with no load balancer made %d mutating calls, want 0", svc.Name, n)
	}
}
