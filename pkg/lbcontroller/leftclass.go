package lbcontroller

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// forgetUnserved forgets a Service the controller no longer serves, unless
// the router still holds its load balancer for it: a LoadBalancer Service
// of one of our classes that a reload removed from the config, which keeps
// its record. Its load balancer is left alone while it lives
// (docs/routing.md: nothing is deleted by a config change), but the
// controller keeps the copy it last served, so that the Service's deletion
// with its finalizer removed by hand (gone), or its re-creation under its
// name (replaced), still deletes the load balancer; a Service forgotten
// here left its load balancers in the clouds for good (chaos seed
// 631642364).
func (c *Controller) forgetUnserved(key string, svc *corev1.Service) {
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass != nil && hasRecord(svc) {
		return
	}
	c.forget(key)
}

// classChanged reports whether the Service, a LoadBalancer again, has
// another class than the copy the controller last served (st): the API
// changes a class only through another type, so the Service was a
// ClusterIP (say) meanwhile, and kube-apiserver cleared its status then;
// the controller, busy or watching again, saw only the end state.
func classChanged(st *served, svc *corev1.Service) bool {
	return st != nil && svc.Spec.Type == corev1.ServiceTypeLoadBalancer && !ptr.Equal(st.svc.Spec.LoadBalancerClass, svc.Spec.LoadBalancerClass)
}

// endChangedClass does for a Service whose class changed to one the
// controller does not serve (classChanged) what the cleanup of its change
// to ClusterIP would have done: its load balancers are deleted (the
// router's record names them), and the controller lets it go (letGo: the
// finalizers go, the shared one stays if the new class's controller
// already wrote an address). Taken for a Service of a class a reload
// removed, it kept them all: an address counted in addresses_in_use that
// no status showed, and an NLB of a Service another controller serves
// (chaos seed 857543738).
func (c *Controller) endChangedClass(ctx context.Context, key string, svc *corev1.Service, st *served) error {
	klog.FromContext(ctx).Info("The Service's class changed since its last sync (it was of another type meanwhile); deleting its load balancer",
		"from", ptr.Deref(st.svc.Spec.LoadBalancerClass, ""), "to", ptr.Deref(svc.Spec.LoadBalancerClass, ""))
	c.event(svc, corev1.EventTypeNormal, reasonDeleting, "Deleting load balancer")
	if err := c.cloud.EnsureLoadBalancerDeleted(ctx, c.opts.ClusterName, svc); err != nil && !errors.Is(err, cloudprovider.ImplementedElsewhere) {
		c.event(svc, corev1.EventTypeWarning, reasonSyncFailed, "Error syncing load balancer: failed to delete load balancer: "+err.Error())
		return err
	}
	c.event(svc, corev1.EventTypeNormal, reasonDeleted, "Deleted load balancer")
	c.forget(key)
	return c.letGo(ctx, svc)
}
