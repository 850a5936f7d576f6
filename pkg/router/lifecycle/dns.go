package lifecycle

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// A load balancer announced from the Service's status (bare metal: MetalLB's
// speaker announces what status.loadBalancer.ingress shows) keeps its
// addresses in the status while it drains: taken out, they would stop
// answering at once, and a restarted allocator, which learns from the
// statuses which addresses are taken, could hand them to another Service.
// external-dns, which publishes the status, is steered instead: while such
// a drain lasts the router sets external-dns's target annotation to the
// serving backends' addresses, so DNS publishes only those, and removes it
// when the last such drain ends (or is cancelled, or the Service goes).
// multicloud-ccm.io/load-balancer-dns-target records the value the router
// wrote, so that it knows, across restarts, that the annotation is its
// own; a target annotation it did not write is never changed or removed.

// dnsChanges adds to changes the steering of external-dns for the
// Service's drains as next leaves them: while a load balancer announced
// from the status drains, the target annotation lists serving (the
// serving backends' addresses; "" when unknown: left as it is); once none
// does, the router's target annotation goes. It returns how DNS is steered
// ("" when it is not).
func (r *Balancer) dnsChanges(changes map[annotation.Name]*string, cur *corev1.Service, next svcstate.Draining, serving string) string {
	if !r.announcedDrains(next) {
		svcstate.SteerDNS(changes, cur, "")
		return ""
	}
	if serving == "" {
		return ""
	}
	return svcstate.SteerDNS(changes, cur, serving)
}

// announcedDrains reports whether the record has a load balancer announced
// from the status draining.
func (r *Balancer) announcedDrains(d svcstate.Draining) bool {
	for n := range d {
		if b, ok := r.ByName[n]; ok && b.LB != nil && b.AnnouncedFromStatus() {
			return true
		}
	}
	return false
}
