package lbcontroller

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// Finalizer is the cleanup finalizer the controller keeps on the Services
// it serves under a spec.loadBalancerClass: the Service is not removed
// before its load balancer is deleted. Upstream's service controller, in
// any CCM, cleans up every Service being deleted that carries the shared
// finalizer service.kubernetes.io/load-balancer-cleanup, whatever its
// class (needsCleanup in k8s.io/cloud-provider's controllers/service):
// beside another CCM, a classed Service under the shared finalizer was
// cleaned up by both. Classless Services keep the shared finalizer, as
// upstream's service controller, which may serve them instead of ours
// (--controllers=*,service), puts it.
//
// A classed Service carrying the shared finalizer (served by an earlier
// version) is moved to this one in one write guarded by its
// resourceVersion, which adds this one and removes the shared one
// together (withWanted), so it never carries neither while it has a load
// balancer; its deletion is cleaned up under either.
const Finalizer = "multicloud-ccm.io/load-balancer-cleanup"

// sharedFinalizer is upstream's cleanup finalizer.
const sharedFinalizer = servicehelper.LoadBalancerCleanupFinalizer

// finalizerFor is the finalizer the controller keeps on a Service it
// serves: its own for a classed one, the shared one for a classless one.
func finalizerFor(svc *corev1.Service) string {
	if svc.Spec.LoadBalancerClass != nil {
		return Finalizer
	}
	return sharedFinalizer
}

// otherFinalizer is the cleanup finalizer a Service the controller serves
// should not carry: the shared one for a classed Service, ours for a
// classless one (a classed Service turned ClusterIP, then a classless
// LoadBalancer, before the controller saw it).
func otherFinalizer(svc *corev1.Service) string {
	if finalizerFor(svc) == Finalizer {
		return sharedFinalizer
	}
	return Finalizer
}

func hasFinalizer(svc *corev1.Service, f string) bool { return slices.Contains(svc.Finalizers, f) }

// hasCleanupFinalizer reports whether the Service carries either cleanup
// finalizer.
func hasCleanupFinalizer(svc *corev1.Service) bool {
	return hasFinalizer(svc, Finalizer) || hasFinalizer(svc, sharedFinalizer)
}

// withWanted returns the Service's finalizers with finalizerFor's in the
// place of otherFinalizer's (appended when it carried neither), and
// whether that changes them.
func withWanted(svc *corev1.Service) ([]string, bool) {
	want, other := finalizerFor(svc), otherFinalizer(svc)
	if hasFinalizer(svc, want) && !hasFinalizer(svc, other) {
		return svc.Finalizers, false
	}
	out := make([]string, 0, len(svc.Finalizers)+1)
	placed := false
	for _, f := range svc.Finalizers {
		switch f {
		case want, other:
			if !placed {
				out = append(out, want)
				placed = true
			}
		default:
			out = append(out, f)
		}
	}
	if !placed {
		out = append(out, want)
	}
	return out, true
}

// without returns the Service's finalizers less drop.
func without(svc *corev1.Service, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(svc.Finalizers), func(f string) bool { return slices.Contains(drop, f) })
}

// hasRecord reports whether the router wrote on the Service that it gave
// it a load balancer: its record, or the backends serving it.
func hasRecord(svc *corev1.Service) bool {
	return svc.Annotations[string(annotation.LoadBalancerBackends)] != "" ||
		svc.Annotations[string(annotation.LoadBalancerServedBy)] != ""
}
