package router

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
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

// externalDNSTargets are external-dns's target annotation under its two
// prefixes: external-dns.alpha.kubernetes.io/ (releases before v0.22, and
// later ones with --enable-legacy-annotation-prefix) and
// external-dns.kubernetes.io/ (the default since v0.22). The router writes
// both, with the same value, so that either release reads it.
var externalDNSTargets = []annotation.Name{
	"external-dns.alpha.kubernetes.io/target",
	"external-dns.kubernetes.io/target",
}

// dnsTarget is external-dns's target annotation value listing addresses:
// IPs and hostnames, comma-separated, in order.
func dnsTarget(addrs []corev1.LoadBalancerIngress) string {
	out := make([]string, 0, len(addrs))
	for _, in := range addrs {
		if v := in.IP + in.Hostname; v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return strings.Join(out, ",")
}

// dnsTargetOwner says who set the Service's external-dns target
// annotation: no one, the router (every one present says what
// multicloud-ccm.io/load-balancer-dns-target recorded), or someone else.
func dnsTargetOwner(cur *corev1.Service) (present, ours bool) {
	mark, marked := cur.Annotations[string(annotation.LoadBalancerDNSTarget)]
	ours = marked
	for _, k := range externalDNSTargets {
		if v, ok := cur.Annotations[string(k)]; ok {
			present = true
			ours = ours && v == mark
		}
	}
	return present, ours
}

// steerDNS adds to changes what makes the Service's external-dns target
// annotation list want ("": the router's removed). A target annotation
// someone else set is left as it is (and the router's mark dropped, the
// annotation being no longer its own). It returns how DNS is steered.
func steerDNS(changes map[annotation.Name]*string, cur *corev1.Service, want string) string {
	present, ours := dnsTargetOwner(cur)
	if present && !ours {
		setAnnotation(changes, cur, annotation.LoadBalancerDNSTarget, "")
		return fmt.Sprintf("external-dns's target annotation %s was set by someone else and is left alone", externalDNSTargets[0])
	}
	for _, k := range externalDNSTargets {
		setAnnotation(changes, cur, k, want)
	}
	setAnnotation(changes, cur, annotation.LoadBalancerDNSTarget, want)
	return fmt.Sprintf("external-dns's target annotation lists only the serving addresses (%s)", want)
}

// dnsChanges adds to changes the steering of external-dns for the
// Service's drains as next leaves them: while a load balancer announced
// from the status drains, the target annotation lists serving (the
// serving backends' addresses; "" when unknown: left as it is); once none
// does, the router's target annotation goes. It returns how DNS is steered
// ("" when it is not).
func (r *Router) dnsChanges(changes map[annotation.Name]*string, cur *corev1.Service, next drainRecord, serving string) string {
	if !r.announcedDrains(next) {
		steerDNS(changes, cur, "")
		return ""
	}
	if serving == "" {
		return ""
	}
	return steerDNS(changes, cur, serving)
}

// announcedDrains reports whether the record has a load balancer announced
// from the status draining.
func (r *Router) announcedDrains(d drainRecord) bool {
	for n := range d {
		if b, ok := r.byName[n]; ok && b.LB != nil && b.AnnouncedFromStatus() {
			return true
		}
	}
	return false
}
