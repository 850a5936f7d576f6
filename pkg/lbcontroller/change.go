package lbcontroller

import (
	"maps"
	"reflect"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// Annotations the CCM writes itself on Services it serves: a change in
// them alone is the controller's own write coming back, not a reason to
// sync.
var ownAnnotations = []string{
	string(annotation.LoadBalancerBackends),
	string(annotation.LoadBalancerRecordClass),
	string(annotation.LoadBalancerServedBy),
	string(annotation.LoadBalancerID),
	string(annotation.LoadBalancerDraining),
	string(annotation.LoadBalancerDNSTarget),
}

// external-dns's target annotation under its two prefixes: the router
// writes it while a bare-metal load balancer drains, recording the value
// in annotation.LoadBalancerDNSTarget; it is the CCM's own while it says
// what that records (pkg/router/lifecycle/dns.go).
var dnsTargets = []string{"external-dns.alpha.kubernetes.io/target", "external-dns.kubernetes.io/target"}

// kube-vip's address annotation and the bare-metal backend's mark on it
// (pkg/backends/baremetal): written by the backend when the mark is set.
const (
	kubeVIPAddresses = "kube-vip.io/loadbalancerIPs"
	kubeVIPMark      = "multicloud-ccm.io/kube-vip-announced"
)

// userAnnotations are a Service's annotations without those the CCM writes.
func userAnnotations(svc *corev1.Service) map[string]string {
	out := maps.Clone(svc.Annotations)
	if mark, ok := out[string(annotation.LoadBalancerDNSTarget)]; ok {
		for _, k := range dnsTargets {
			if v, set := out[k]; set && v == mark {
				delete(out, k)
			}
		}
	}
	for _, k := range ownAnnotations {
		delete(out, k)
	}
	if out[kubeVIPMark] == "true" {
		delete(out, kubeVIPMark)
		delete(out, kubeVIPAddresses)
	}
	return out
}

// relevantChange reports whether an update of a Service can change what
// its load balancer should be: its spec, its annotations (other than the
// CCM's own), its finalizers, its deletion or its identity. Status changes
// and the controller's own writes are not.
func relevantChange(old, cur *corev1.Service) bool {
	if old.UID != cur.UID ||
		!old.DeletionTimestamp.Equal(cur.DeletionTimestamp) ||
		!reflect.DeepEqual(old.Finalizers, cur.Finalizers) ||
		!reflect.DeepEqual(old.Spec, cur.Spec) {
		return true
	}
	a, b := userAnnotations(old), userAnnotations(cur)
	if len(a) == 0 && len(b) == 0 {
		return false
	}
	return !maps.Equal(a, b)
}
