package lbcontroller

import (
	corev1 "k8s.io/api/core/v1"
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
