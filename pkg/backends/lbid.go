package backends

import (
	"context"
	"maps"
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
	mu          sync.Mutex
	id          string
	annotations map[string]string
}

// serviceAnnotations are, by backend type, the annotations a backend type
// writes back on the Services it serves (RegisterServiceAnnotations).
var serviceAnnotations sync.Map // string -> []string

// RegisterServiceAnnotations declares the annotations a backend type
// writes back on the Services it serves, as the upstream CCM of its cloud
// does (OCCM writes loadbalancer.openstack.org/load-balancer-id and
// -address), so users' tools that read them keep working. Call it from
// the backend package's init. The router writes the values the backend
// reports with ReportServiceAnnotation and removes the annotations when
// the backend stops serving the Service (moved elsewhere, no longer a
// load balancer); a registered annotation the backend does not report in a
// successful EnsureLoadBalancer is removed.
func RegisterServiceAnnotations(backendType string, keys ...string) {
	serviceAnnotations.Store(backendType, keys)
}

// ServiceAnnotationsOf returns the annotations backendType registered.
func ServiceAnnotationsOf(backendType string) []string {
	keys, _ := serviceAnnotations.Load(backendType)
	k, _ := keys.([]string)
	return k
}

// ReportServiceAnnotation reports the value of an annotation the backend
// registered with RegisterServiceAnnotations, for the router to write on
// the Service after a successful EnsureLoadBalancer. Like
// ReportLoadBalancerID it is called with EnsureLoadBalancer's ctx and does
// nothing outside such a call.
func ReportServiceAnnotation(ctx context.Context, key, value string) {
	if slot, ok := ctx.Value(lbIDKey{}).(*lbIDSlot); ok {
		slot.mu.Lock()
		if slot.annotations == nil {
			slot.annotations = map[string]string{}
		}
		slot.annotations[key] = value
		slot.mu.Unlock()
	}
}

// ReportedServiceAnnotations returns the annotations reported under ctx,
// a ctx from WithLoadBalancerIDReport (nil for none).
func ReportedServiceAnnotations(ctx context.Context) map[string]string {
	slot, ok := ctx.Value(lbIDKey{}).(*lbIDSlot)
	if !ok {
		return nil
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	return maps.Clone(slot.annotations)
}
