package router

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
)

// A Service's sync is one decision (issue 40), made and recorded in
// package lifecycle (decision.go); these are its names as the router
// offers them.

// StepKind is what the router does with a Service's load balancer in one
// backend.
type StepKind = lifecycle.StepKind

// The steps of a decision (see lifecycle.StepKind).
const (
	StepEnsure      = lifecycle.StepEnsure
	StepDrain       = lifecycle.StepDrain
	StepDelete      = lifecycle.StepDelete
	StepForget      = lifecycle.StepForget
	StepUnreachable = lifecycle.StepUnreachable
)

// Step is the router's step in one backend.
type Step = lifecycle.Step

// Decision is what the router decided for one sync of a Service
// (EnsureLoadBalancer).
type Decision = lifecycle.Decision

// WithDecision returns a context under which EnsureLoadBalancer records
// its decision in the Decision returned.
func WithDecision(ctx context.Context) (context.Context, *Decision) {
	return lifecycle.WithDecision(ctx)
}

// Decide returns the router's decision for a sync of the Service with
// these nodes, under a dry run (see lifecycle.Balancer.Decide).
func (r *Router) Decide(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) *Decision {
	return r.lb.Decide(ctx, clusterName, service, nodes)
}
