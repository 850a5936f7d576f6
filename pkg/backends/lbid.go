package backends

import (
	"context"
	"sync"
)

// ReportLoadBalancerID tells the router the cloud's own ID of the load
// balancer an EnsureLoadBalancer call made or found (an ELBv2 ARN, an
// Octavia load balancer's UUID, ...). The router writes it on the Service
// (annotation multicloud-ccm.io/load-balancer-id) for operators and tools.
// Optional: a backend that never calls it leaves the annotation off. Call it
// from EnsureLoadBalancer with the ctx it was given, with an ID the backend
// already holds (no extra cloud call); outside such a call it does nothing.
func ReportLoadBalancerID(ctx context.Context, id string) {
	if slot, ok := ctx.Value(lbIDKey{}).(*lbIDSlot); ok {
		slot.mu.Lock()
		slot.id = id
		slot.mu.Unlock()
	}
}

// WithLoadBalancerIDReport returns a ctx through which a backend's
// ReportLoadBalancerID reaches the returned function, which gives the last
// ID reported ("" for none). The router calls it around EnsureLoadBalancer.
func WithLoadBalancerIDReport(ctx context.Context) (context.Context, func() string) {
	slot := &lbIDSlot{}
	return context.WithValue(ctx, lbIDKey{}, slot), func() string {
		slot.mu.Lock()
		defer slot.mu.Unlock()
		return slot.id
	}
}

type lbIDKey struct{}

type lbIDSlot struct {
	mu sync.Mutex
	id string
}
