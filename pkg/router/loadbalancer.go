package router

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
)

// The load-balancer calls of a Router are its lifecycle.Balancer's: the
// methods below hand each one on, and their contracts are written there
// (package lifecycle).

// GetLoadBalancer asks the backends that may hold the Service's load
// balancer (see lifecycle.Balancer.GetLoadBalancer).
func (r *Router) GetLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	return r.lb.GetLoadBalancer(ctx, clusterName, service)
}

// GetLoadBalancerName returns the target backend's name for the load
// balancer, or the upstream default name.
func (r *Router) GetLoadBalancerName(ctx context.Context, clusterName string, service *corev1.Service) string {
	return r.lb.GetLoadBalancerName(ctx, clusterName, service)
}

// EnsureLoadBalancer records the target backends on the Service, ensures
// the load balancer in each and retires the others (see
// lifecycle.Balancer.EnsureLoadBalancer).
func (r *Router) EnsureLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	return r.lb.EnsureLoadBalancer(ctx, clusterName, service, nodes)
}

// UpdateLoadBalancer hands the backends holding the Service's load
// balancer their targetable nodes (see lifecycle.Balancer.UpdateLoadBalancer).
func (r *Router) UpdateLoadBalancer(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) error {
	return r.lb.UpdateLoadBalancer(ctx, clusterName, service, nodes)
}

// EnsureLoadBalancerDeleted deletes the Service's load balancer from every
// backend that may hold one (see lifecycle.Balancer.EnsureLoadBalancerDeleted).
func (r *Router) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *corev1.Service) error {
	return r.lb.EnsureLoadBalancerDeleted(ctx, clusterName, service)
}

// LoadBalancerTargets returns, among nodes, those the Service's load
// balancers target (see lifecycle.Balancer.LoadBalancerTargets).
func (r *Router) LoadBalancerTargets(service *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	return r.lb.LoadBalancerTargets(service, nodes)
}

// LoadBalancerTargetsByBackend returns, by backend name, the nodes each
// backend serving the Service targets (see
// lifecycle.Balancer.LoadBalancerTargetsByBackend).
func (r *Router) LoadBalancerTargetsByBackend(service *corev1.Service, nodes []*corev1.Node) map[string][]*corev1.Node {
	return r.lb.LoadBalancerTargetsByBackend(service, nodes)
}

// RetargetsOnAddressChange reports whether a node's address change
// changes the Service's load balancer in the named backend (see
// lifecycle.Balancer.RetargetsOnAddressChange).
func (r *Router) RetargetsOnAddressChange(service *corev1.Service, backendName string, old, node *corev1.Node) bool {
	return r.lb.RetargetsOnAddressChange(service, backendName, old, node)
}

// LoadBalancerTargetsEnsured is LoadBalancerTargetsByBackend for the
// Service and nodes of a successful EnsureLoadBalancer whose decision is
// dec (DecisionForWrite), answered from the nodes that call handed each
// backend where they are certainly the same answer (see
// lifecycle.Balancer.LoadBalancerTargetsEnsured).
func (r *Router) LoadBalancerTargetsEnsured(dec *Decision, service *corev1.Service, nodes []*corev1.Node) map[string][]*corev1.Node {
	return r.lb.LoadBalancerTargetsEnsured(dec, service, nodes)
}

// PrepareLoadBalancer returns the annotation changes the router would
// write on service before ensuring its load balancer (see
// lifecycle.Balancer.PrepareLoadBalancer).
func (r *Router) PrepareLoadBalancer(service *corev1.Service) map[string]*string {
	return r.lb.PrepareLoadBalancer(service)
}

// PreparedFrom returns a context telling EnsureLoadBalancer that the
// Service it is handed is before with PrepareLoadBalancer's annotations
// written by the caller (see lifecycle.PreparedFrom).
func PreparedFrom(ctx context.Context, before *corev1.Service) context.Context {
	return lifecycle.PreparedFrom(ctx, before)
}

// RequeuesOnNodeChange returns a context telling EnsureLoadBalancer and
// UpdateLoadBalancer that the caller queues the Service again itself when
// a node changed while the call was in flight (see
// lifecycle.RequeuesOnNodeChange).
func RequeuesOnNodeChange(ctx context.Context) context.Context {
	return lifecycle.RequeuesOnNodeChange(ctx)
}

// ServiceGone returns a context telling EnsureLoadBalancerDeleted that the
// Service it is handed is gone (see lifecycle.ServiceGone).
func ServiceGone(ctx context.Context) context.Context { return lifecycle.ServiceGone(ctx) }

// ServedWrite is the router's share of the write a controller makes after
// EnsureLoadBalancer succeeded (see lifecycle.ServedWrite).
type ServedWrite = lifecycle.ServedWrite

// DeferServedAnnotations returns a context under which EnsureLoadBalancer
// leaves the annotations naming the serving backends to the caller (see
// lifecycle.DeferServedAnnotations).
func DeferServedAnnotations(ctx context.Context) (context.Context, func() *ServedWrite) {
	return lifecycle.DeferServedAnnotations(ctx)
}
