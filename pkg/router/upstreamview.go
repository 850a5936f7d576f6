package router

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	servicehelper "k8s.io/cloud-provider/service/helpers"
)

// Upstream's service controller (k8s.io/cloud-provider
// controllers/service) serves only Services without a class, except on one
// path: a Service carrying the finalizer
// service.kubernetes.io/load-balancer-cleanup that is being deleted or is
// no longer of type LoadBalancer, whatever its class. It then asks
// GetLoadBalancer, calls EnsureLoadBalancerDeleted if that reports one
// (ImplementedElsewhere from it is ignored), and always removes the
// finalizer, recording DeletingLoadBalancer and DeletedLoadBalancer events.
// Only an error stops it (it retries, with a Warning SyncLoadBalancerFailed
// event).
//
// So the provider offers that controller (through LoadBalancer()) a view
// of itself that answers for classed Services:
//   - a class the configuration does not list: no load balancer, and
//     nothing of ours is called nor any event of ours recorded;
//   - one of our classes, in clean-up: an error, so that only our
//     load-balancer controller (pkg/lbcontroller), which calls the router
//     itself, deletes the load balancer and removes the finalizer, and the
//     two never clean up at once; upstream retries (5 s, then longer) and
//     finds the finalizer gone;
//   - Ensure, Update and Delete of a classed Service: ImplementedElsewhere.
//
// Classless Services go to the router unchanged.

// classAwareBalancer is the view of a router, or of a Reloadable, that
// upstream's service controller gets.
type classAwareBalancer struct {
	lb        cloudprovider.LoadBalancer
	servesCls func(class string) bool
}

var _ cloudprovider.LoadBalancer = classAwareBalancer{}

// hasClass reports whether the service controller must leave the Service
// alone: it has a class.
func hasClass(svc *corev1.Service) bool { return svc.Spec.LoadBalancerClass != nil }

// GetLoadBalancer answers for classed Services without asking any backend.
func (v classAwareBalancer) GetLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	if !hasClass(svc) {
		return v.lb.GetLoadBalancer(ctx, clusterName, svc)
	}
	class := *svc.Spec.LoadBalancerClass
	if v.servesCls(class) && servicehelper.HasLBFinalizer(svc) {
		return nil, false, fmt.Errorf("service %s/%s: spec.loadBalancerClass %q is served by multicloud-ccm's load-balancer controller, "+
			"which deletes its load balancer and then removes the finalizer %s; the service controller leaves it alone",
			svc.Namespace, svc.Name, class, servicehelper.LoadBalancerCleanupFinalizer)
	}
	return nil, false, nil
}

// GetLoadBalancerName is the router's.
func (v classAwareBalancer) GetLoadBalancerName(ctx context.Context, clusterName string, svc *corev1.Service) string {
	return v.lb.GetLoadBalancerName(ctx, clusterName, svc)
}

// EnsureLoadBalancer is the router's for classless Services.
func (v classAwareBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	if hasClass(svc) {
		return nil, cloudprovider.ImplementedElsewhere
	}
	return v.lb.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
}

// UpdateLoadBalancer is the router's for classless Services.
func (v classAwareBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	if hasClass(svc) {
		return cloudprovider.ImplementedElsewhere
	}
	return v.lb.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
}

// EnsureLoadBalancerDeleted is the router's for classless Services.
func (v classAwareBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	if hasClass(svc) {
		return cloudprovider.ImplementedElsewhere
	}
	return v.lb.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
}
