package lbcontroller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
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
// another class than the one it had when we served it (classBefore): the
// API changes a class only through another type, so the Service was a
// ClusterIP (say) meanwhile, and kube-apiserver cleared its status then;
// the controller, busy, watching again or restarted, saw only the end
// state.
func classChanged(st *served, svc *corev1.Service) bool {
	was, ok := classBefore(st, svc)
	return ok && svc.Spec.Type == corev1.ServiceTypeLoadBalancer && !ptr.Equal(was, svc.Spec.LoadBalancerClass)
}

// classBefore returns the class the Service had when we served it (nil:
// none), and whether that is known: the class the router's record on it
// was made for (annotation.LoadBalancerRecordClass), which outlives a
// restart, a failover and a forget; for a record an earlier version wrote,
// without it, the class of the copy the controller last synced (st).
func classBefore(st *served, svc *corev1.Service) (*string, bool) {
	if v, ok := svc.Annotations[string(annotation.LoadBalancerRecordClass)]; ok {
		if v == "" {
			return nil, true
		}
		return &v, true
	}
	if st == nil || st.svc.UID != svc.UID {
		return nil, false
	}
	return st.svc.Spec.LoadBalancerClass, true
}
