package router

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// stepsOf lists a decision's steps as "kind backend" (drains with how
// long they have left, rounded to the minute; deletes ending a drain
// marked so).
func stepsOf(d *Decision) []string {
	var out []string
	for _, s := range d.Steps {
		step := string(s.Kind) + " " + s.Backend
		switch {
		case s.Kind == StepDrain:
			step += fmt.Sprintf(" for %s", time.Until(s.Until).Round(time.Minute))
		case s.Drained:
			step += " (drained)"
		case s.Err != nil:
			step += " (failed)"
		}
		out = append(out, step)
	}
	return out
}

// TestDecision: the router's decision for one sync of a Service (Decide,
// which pkg/plan prints) names its targets and, per backend that may hold
// its load balancer, the step taken there; and a sync run for real
// (EnsureLoadBalancer under WithDecision) decides the same.
func TestDecision(t *testing.T) {
	tests := []struct {
		name string
		// before is where the Service is served first (annotation value).
		before string
		// edit changes the Service for the sync decided.
		edit      func(*corev1.Service)
		tweaks    []func(*config.CloudConfig)
		targets   []string
		steps     []string
		status    string
		elsewhere bool
	}{
		{name: "steady", before: "a", edit: func(*corev1.Service) {},
			targets: []string{"a"}, steps: []string{"ensure a"}, status: "192.0.2.1"},
		{name: "moved, no drain", before: "a", edit: func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "b" },
			targets: []string{"b"}, steps: []string{"ensure b", "delete a"}, status: "198.51.100.1"},
		{name: "moved, drained", before: "a", edit: func(s *corev1.Service) {
			s.Annotations[string(annotation.LoadBalancerBackend)] = "b"
			s.Annotations[string(annotation.LoadBalancerDrain)] = "5m"
		}, targets: []string{"b"}, steps: []string{"ensure b", "drain a for 5m0s"}, status: "198.51.100.1"},
		{name: "a second backend", before: "a", edit: func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "a,b" },
			targets: []string{"a", "b"}, steps: []string{"ensure a", "ensure b"}, status: "192.0.2.1,198.51.100.1"},
		{name: "left to another controller", before: "a", edit: func(s *corev1.Service) { delete(s.Annotations, string(annotation.LoadBalancerBackend)) },
			steps: []string{"delete a"}, elsewhere: true},
		{name: "recorded backend not configured", before: "a", edit: func(s *corev1.Service) {
			s.Annotations[string(annotation.LoadBalancerBackends)] = "a,gone"
		}, targets: []string{"a"}, steps: []string{"ensure a", "unreachable gone"}, status: "192.0.2.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, how := range []string{"Decide", "EnsureLoadBalancer"} {
				r, _, _ := twoClouds(t, tt.tweaks...)
				svc := newService("s", withLBBackend(tt.before))
				ensure(t, r, svc)
				svc.Annotations[string(annotation.LoadBalancerBackends)] = tt.before
				tt.edit(svc)
				var d *Decision
				if how == "Decide" {
					d = r.Decide(context.Background(), cluster, svc, nil)
				} else {
					var ctx context.Context
					ctx, d = WithDecision(context.Background())
					d.Status, d.Err = r.EnsureLoadBalancer(ctx, cluster, svc, nil)
				}
				if tt.elsewhere {
					if !d.Elsewhere || d.Err == nil {
						t.Errorf("%s: Elsewhere %v, error %v; want ImplementedElsewhere", how, d.Elsewhere, d.Err)
					}
				} else if d.Err != nil || d.Elsewhere {
					t.Fatalf("%s: error %v, elsewhere %v", how, d.Err, d.Elsewhere)
				}
				got := ""
				if d.Status != nil {
					got = ingressIPs(&corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: *d.Status}})
				}
				if !slices.Equal(d.Targets, tt.targets) || !slices.Equal(stepsOf(d), tt.steps) || got != tt.status {
					t.Errorf("%s: targets %q, steps %q, status %q; want %q, %q, %q", how, d.Targets, stepsOf(d), got, tt.targets, tt.steps, tt.status)
				}
			}
		})
	}
}

// TestDecisionAnnotations: the decision carries the annotations naming
// who serves the Service after a move, as changes to the copy handed.
func TestDecisionAnnotations(t *testing.T) {
	r, _, _ := twoClouds(t)
	svc := newService("s", withLBBackend("a"))
	svc.Annotations[string(annotation.LoadBalancerServedBy)] = "a"
	svc.Annotations[string(annotation.LoadBalancerBackends)] = "a"
	svc.Annotations[string(annotation.LoadBalancerBackend)] = "b"
	d := r.Decide(context.Background(), cluster, svc, nil)
	if v := d.Annotations[annotation.LoadBalancerServedBy]; d.Err != nil || v == nil || *v != "b" {
		t.Errorf("error %v, served-by change %v; want b", d.Err, v)
	}
}
