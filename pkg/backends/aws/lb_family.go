package aws

import (
	"context"
	"net"
	"strings"

	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
)

// The IP address types of target groups. An NLB listener forwards to one
// target group and a group has one type, so a Service's groups are all of
// its primary IP family (primaryFamily); a dual-stack NLB serves IPv4 and
// IPv6 clients on every listener whichever family its groups are.
const (
	familyIPv4 = "ipv4"
	familyIPv6 = "ipv6"
)

// primaryFamily is the IP address type of the Service's target groups:
// its primary IP family (spec.ipFamilies[0]), IPv4 when none is set, as
// the AWS Load Balancer Controller chooses it.
func primaryFamily(svc *corev1.Service) string {
	if len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol {
		return familyIPv6
	}
	return familyIPv4
}

// readFamily checks that the annotations allow d's family: AWS attaches an
// IPv6 target group only to a dualstack NLB, and the backend gives IPv6
// groups the nodes' addresses (IP targets). targetType is the
// AnnotationTargetType read ("" when not set).
func readFamily(r *reader, d *desiredLB, targetType string) {
	if d.family != familyIPv6 {
		return
	}
	// Another bad value of the annotation is already reported.
	if v, set := AnnotationIPAddressType.Get(r.values); d.ipType != "dualstack" && (!set || strings.TrimSpace(v) == "ipv4") {
		r.Invalid(AnnotationIPAddressType, v, "the Service's primary IP family (spec.ipFamilies[0]) is IPv6, so its target groups are IPv6, "+
			"which AWS attaches only to a dual-stack load balancer; set it to dualstack")
	}
	if targetType == targetInstance {
		r.Invalid(AnnotationTargetType, targetType, "the Service's primary IP family (spec.ipFamilies[0]) is IPv6: its target groups take the nodes' IPv6 addresses as IP targets; set it to ip or remove it")
	}
}

// groupFamily is a target group's IP address type (AWS's default, ipv4,
// when it answers none).
func groupFamily(tg elbtypes.TargetGroup) string {
	if tg.IpAddressType == elbtypes.TargetGroupIpAddressTypeEnumIpv6 {
		return familyIPv6
	}
	return familyIPv4
}

// nodeIPv6In returns the node's first IPv6 InternalIP inside an IPv6 block
// of the VPC's subnets: AWS takes no IPv6 target outside them.
func nodeIPv6In(n *corev1.Node, subnets []subnet) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip := net.ParseIP(a.Address); ip != nil && ip.To4() == nil && inSubnets(subnets, ip) {
			return ip
		}
	}
	return nil
}

// hasIPv6 reports whether the node has an IPv6 InternalIP.
func hasIPv6(n *corev1.Node) bool {
	for _, a := range n.Status.Addresses {
		if ip := net.ParseIP(a.Address); a.Type == corev1.NodeInternalIP && ip != nil && ip.To4() == nil {
			return true
		}
	}
	return false
}

// inSubnets reports whether one of the subnets holds ip.
func inSubnets(subnets []subnet, ip net.IP) bool {
	for _, sn := range subnets {
		if sn.holds(ip) {
			return true
		}
	}
	return false
}

// warnNoTargets records a Warning when none of the Service's nodes (after
// target-node-labels) has an address of the target groups' family: the
// load balancer is made all the same, and gets targets as nodes get such
// addresses.
func (l *LoadBalancer) warnNoTargets(ctx context.Context, d *desiredLB, nodes int) {
	if d.targetType != targetIP || nodes == 0 || len(d.targets) > 0 {
		return
	}
	if d.family == familyIPv6 {
		l.events.announce(ctx, corev1.EventTypeWarning, reasonNoTargets,
			"None of the %d nodes has an IPv6 InternalIP address inside an IPv6 block of the VPC's subnets, so the load balancer's IPv6 target groups (the Service's primary IP family, spec.ipFamilies[0], is IPv6) have no targets. "+
				"Give the nodes IPv6 addresses in the VPC's subnets, or re-create the Service with IPv4 as its primary family", nodes)
		return
	}
	l.events.announce(ctx, corev1.EventTypeWarning, reasonNoTargets,
		"None of the %d nodes has an IPv4 InternalIP address, so the load balancer's IPv4 target groups have no targets. Give the nodes IPv4 addresses, or make the Service IPv6-primary (with %s: dualstack)",
		nodes, AnnotationIPAddressType)
}
