package svcstate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// externalDNSTargets are external-dns's target annotation under its two
// prefixes: external-dns.alpha.kubernetes.io/ (releases before v0.22, and
// later ones with --enable-legacy-annotation-prefix) and
// external-dns.kubernetes.io/ (the default since v0.22). The router writes
// both, with the same value, so that either release reads it.
var externalDNSTargets = []annotation.Name{
	"external-dns.alpha.kubernetes.io/target",
	"external-dns.kubernetes.io/target",
}

// DNSTarget is external-dns's target annotation value listing addresses:
// IPs and hostnames, comma-separated, in order.
func DNSTarget(addrs []corev1.LoadBalancerIngress) string {
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

// SteerDNS adds to changes what makes the Service's external-dns target
// annotation list want ("": the router's removed). A target annotation
// someone else set is left as it is (and the router's mark dropped, the
// annotation being no longer its own). It returns how DNS is steered.
func SteerDNS(changes map[annotation.Name]*string, cur *corev1.Service, want string) string {
	present, ours := dnsTargetOwner(cur)
	if present && !ours {
		SetAnnotation(changes, cur, annotation.LoadBalancerDNSTarget, "")
		return fmt.Sprintf("external-dns's target annotation %s was set by someone else and is left alone", externalDNSTargets[0])
	}
	for _, k := range externalDNSTargets {
		SetAnnotation(changes, cur, k, want)
	}
	SetAnnotation(changes, cur, annotation.LoadBalancerDNSTarget, want)
	return fmt.Sprintf("external-dns's target annotation lists only the serving addresses (%s)", want)
}
