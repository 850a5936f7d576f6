package router

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/klog/v2"
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
// Classless Services go to the router unchanged, with one difference on
// the delete path (upstreamDeleteWait).

// upstreamDeleteWait bounds how long one EnsureLoadBalancerDeleted of
// upstream's service controller waits out the RetryErrors of a delete
// that converges in steps (Octavia's backend makes one change per call and
// answers a RetryError after each: leaving a shared load balancer is a
// pool, a listener, a tag, then the load balancer). Upstream honours a
// RetryError from EnsureLoadBalancer, but its delete path wraps the error
// with %v (controllers/service, "failed to delete load balancer"), so
// each step would wait out upstream's exponential backoff instead (5 s,
// then 10, 20, 40, 80...): the last Service leaving a shared load
// balancer on a loaded Octavia took over two minutes, and would take
// longer with every step. So the view calls again after the RetryAfter
// the backend asked for, as upstream does on its create path, until the
// delete succeeds or fails otherwise. Bounded, so that one Service's delete
// holds upstream's worker (--concurrent-service-syncs) no longer than a
// synchronous delete of upstream's own CCMs would; past it the RetryError
// goes back, and upstream's backoff takes over. Our load-balancer
// controller calls the router itself and honours RetryErrors on every path.
const upstreamDeleteWait = time.Minute

// classAwareBalancer is the view of a router, or of a Reloadable, that
// upstream's service controller gets.
type classAwareBalancer struct {
	lb        cloudprovider.LoadBalancer
	servesCls func(class string) bool
	// deleteWait is upstreamDeleteWait (shorter in tests).
	deleteWait time.Duration
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

// EnsureLoadBalancerDeleted is the router's for classless Services, with
// the RetryErrors of a delete in steps waited out here, within
// deleteWait: upstream's delete path drops them (upstreamDeleteWait).
func (v classAwareBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	if hasClass(svc) {
		return cloudprovider.ImplementedElsewhere
	}
	deadline := time.Now().Add(v.deleteWait)
	for {
		err := v.lb.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
		after, ok := onlyRetries(err)
		if !ok || time.Now().Add(after).After(deadline) {
			return err
		}
		klog.FromContext(ctx).V(4).Info("Deleting the load balancer in steps; calling again as the backend asked", "service", klog.KObj(svc), "after", after, "step", err.Error())
		t := time.NewTimer(after)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// onlyRetries reports whether err is made of RetryErrors only (one, or
// several joined, each possibly wrapped), and the longest RetryAfter among
// them. An error with any other failure in it is not waited out: calling
// again would not cure it.
func onlyRetries(err error) (time.Duration, bool) {
	switch e := err.(type) { //nolint:errorlint // walks the wrapped and joined errors itself, to see each one.
	case *api.RetryError:
		return e.RetryAfter(), true
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		var longest time.Duration
		for _, one := range errs {
			after, ok := onlyRetries(one)
			if !ok {
				return 0, false
			}
			longest = max(longest, after)
		}
		return longest, len(errs) > 0
	case interface{ Unwrap() error }:
		return onlyRetries(e.Unwrap())
	}
	return 0, false
}
