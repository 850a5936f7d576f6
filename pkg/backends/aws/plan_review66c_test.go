package aws

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"weak"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// review66cCalls are the calls of intents.
func review66cCalls(in []backends.Intent) []string {
	var out []string
	for _, i := range in {
		_, call, _ := strings.Cut(i.Call, ":")
		out = append(out, call)
	}
	return out
}

// TestReview66cPlanOfAServiceOnTwoBackendsThroughThePlansWrappers: the
// case of TestReview66bPlanOfAServiceOnTwoBackendsOfOneVPC (a Service on
// aws-1 and aws-2 of one VPC, upstream's untagged NLB) as `multicloud-ccm
// plan` really calls the backends: the planner opens one dry run per
// Service (pkg/plan/services.go), the router's Decide another inside it
// (pkg/router/lifecycle/decision.go), and the plan's call log wraps every
// backend call in a dry run of its own to collect its intents
// (pkg/plan/observe.go watchedLB.EnsureLoadBalancer). The operator expects
// the plan to show what the switch does: aws-2 refused, nothing planned
// for it.
func TestReview66cPlanOfAServiceOnTwoBackendsThroughThePlansWrappers(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	other := review66bBackend(t, "aws-2", e.url)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	lbA, _ := e.cloud.LoadBalancer()
	lbB, _ := other.LoadBalancer()

	plan, _ := backends.WithDryRun(context.Background()) // pkg/plan/services.go
	decide, _ := backends.WithDryRun(plan)               // router Decide
	inA, _ := backends.WithDryRun(decide)                // watchedLB, aws-1's call
	if _, err := lbA.EnsureLoadBalancer(inA, testCluster, svc, nodes); err != nil {
		t.Fatalf("the plan's Ensure in aws-1: %v", err)
	}
	inB, intentsB := backends.WithDryRun(decide) // watchedLB, aws-2's call
	_, planErr := lbB.EnsureLoadBalancer(inB, testCluster, svc, nodes)

	e.fake.ResetCalls()
	e.ensure(t, svc, nodes)
	e.fake.ResetCalls()
	_, switchErr := lbB.EnsureLoadBalancer(context.Background(), testCluster, svc, nodes)
	madeB := e.fake.MutatingCalls()
	_, planRefused := backends.AsUserError(planErr)
	_, switchRefused := backends.AsUserError(switchErr)
	if planRefused != switchRefused || len(intentsB()) != len(madeB) {
		t.Errorf("aws-2 in the plan (each call in its own nested dry run, as pkg/plan makes them): %v, planned %v; in the switch: %v, made %v; want the plan to show what the switch does",
			planErr, review66cCalls(intentsB()), switchErr, madeB)
	}
	runtime.KeepAlive(other)
}

// TestReview66cPlanOfAMoveWithDrain: a move of a Service from aws-1 to
// aws-2 (one VPC; upstream's NLB, which aws-1 adopted while alone, then
// aws-2 added) planned under one dry run: aws-1's Ensure (it still serves
// while the move drains), aws-2's Ensure, aws-1's delete at the drain's
// end. The operator expects each step's planned calls and outcome to be
// what the real sequence then makes, step by step.
func TestReview66cPlanOfAMoveWithDrain(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	e.ensure(t, svc, nodes) // aws-1 alone: adopted untagged
	other := review66bBackend(t, "aws-2", e.url)
	lbA, _ := e.cloud.LoadBalancer()
	lbB, _ := other.LoadBalancer()
	steps := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"aws-1 Ensure", func(ctx context.Context) error {
			_, err := lbA.EnsureLoadBalancer(ctx, testCluster, svc.DeepCopy(), nodes)
			return err
		}},
		{"aws-2 Ensure", func(ctx context.Context) error {
			_, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc.DeepCopy(), nodes)
			return err
		}},
		{"aws-1 delete", func(ctx context.Context) error {
			return lbA.EnsureLoadBalancerDeleted(ctx, testCluster, svc.DeepCopy())
		}},
	}
	dctx, intents := backends.WithDryRun(context.Background())
	var planned [][]string
	var planErrs []error
	for _, s := range steps {
		n := len(intents())
		planErrs = append(planErrs, s.run(dctx))
		planned = append(planned, review66cCalls(intents()[n:]))
	}
	for i, s := range steps {
		e.fake.ResetCalls()
		err := s.run(context.Background())
		made := slices.Compact(e.fake.MutatingCalls()) // a retried call (ResourceInUse) counts once
		if (err == nil) != (planErrs[i] == nil) || strings.Join(made, " ") != strings.Join(planned[i], " ") {
			t.Errorf("%s: planned %v (err %v); made %v (err %v)", s.name, planned[i], planErrs[i], made, err)
		}
	}
	runtime.KeepAlive(other)
}

// TestReview66cDryRunDeleteByTheOtherBackendKeepsTheHolder: aws-1 holds
// upstream's untagged NLB of web; a plan runs aws-2's delete of web (an
// undone move) then aws-2's Ensure of it. The operator expects aws-2's
// Ensure in that plan refused naming aws-1, as outside the plan: aws-2's
// refused delete let go of nothing.
func TestReview66cDryRunDeleteByTheOtherBackendKeepsTheHolder(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	e.ensure(t, svc, nodes)
	other := review66bBackend(t, "aws-2", e.url)
	lbB, _ := other.LoadBalancer()
	dctx, intents := backends.WithDryRun(context.Background())
	if err := lbB.EnsureLoadBalancerDeleted(dctx, testCluster, svc); err != nil {
		t.Errorf("aws-2's dry-run delete: %v", err)
	}
	_, err := lbB.EnsureLoadBalancer(dctx, testCluster, svc, nodes)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonNameConflict || !strings.Contains(err.Error(), `"aws-1"`) {
		t.Errorf("aws-2's dry-run Ensure after its dry-run delete: %v (planned %v), want a %s naming aws-1", err, review66cCalls(intents()), reasonNameConflict)
	}
	runtime.KeepAlive(other)
	runtime.KeepAlive(e.cloud)
}

// TestReview66cDryRunStateLivesAsLongAsTheRun: DryRunState "lives as long
// as the run". A plan of thousands of Services opens one dry run per
// Service and several per backend call (pkg/plan); the operator expects
// each run's state (its holds) to go once the run ended, also when the
// run planned a target group's delete (a Service deleted).
func TestReview66cDryRunStateLivesAsLongAsTheRun(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbA, _ := e.cloud.LoadBalancer()
	type sentinel struct {
		p *corev1.Service
		_ [64]byte
	}
	w := func() weak.Pointer[sentinel] {
		dctx, intents := backends.WithDryRun(context.Background())
		s := &sentinel{p: svc}
		backends.DryRunState(dctx).Store("review66c", s)
		if err := lbA.EnsureLoadBalancerDeleted(dctx, testCluster, svc.DeepCopy()); err != nil {
			t.Fatalf("dry-run delete: %v", err)
		}
		t.Logf("planned %v", review66cCalls(intents()))
		return weak.Make(s)
	}()
	if !collected(w) {
		t.Errorf("the dry run's state (DryRunState) is still reachable after the run ended: something keeps the dry run alive")
	}
}
