package aws

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// names are the deterministic names of one Service's AWS resources. They
// depend only on the cluster ID and the Service (namespace, name, UID), so
// a restarted backend finds what an earlier run created and never creates
// a second set.
type names struct {
	// hash is 10 hex digits of SHA-256 over cluster ID and Service.
	hash string
	// lb is the NLB's name: k8s-<ns>-<name>-<hash>, at most 32 characters.
	lb string
	// sg is the security group's name.
	sg string
	// service is "<namespace>/<name>".
	service string
	// upstream is the name the upstream AWS provider gives the Service's
	// NLB ("a" + the UID without dashes, at most 32 characters): an NLB of
	// that name tagged as this cluster's and Service's is adopted.
	upstream string
	// upstreamTG starts the names the upstream provider gives the
	// Service's target groups: k8s-<namespace>-<name>- (the first 8
	// letters and digits of each).
	upstreamTG string
}

func namesFor(clusterID string, svc *corev1.Service) names {
	sum := sha256.Sum256([]byte(strings.Join([]string{clusterID, svc.Namespace, svc.Name, string(svc.UID)}, "/")))
	h := hex.EncodeToString(sum[:])[:10]
	lb := fmt.Sprintf("k8s-%s-%s-%s", short(svc.Namespace, 6), short(svc.Name, 8), h)
	return names{hash: h, lb: lb, sg: "k8s-elb-" + lb, service: svc.Namespace + "/" + svc.Name, upstream: cloudprovider.DefaultLoadBalancerName(svc),
		upstreamTG: fmt.Sprintf("k8s-%.8s-%.8s-", upstreamSanitized(svc.Namespace), upstreamSanitized(svc.Name))}
}

// upstreamSanitized drops what the upstream provider drops from a name
// for its target groups' (every character but letters and digits:
// cloud-provider-aws v1.37.1, invalidELBV2NameRegex).
func upstreamSanitized(s string) string {
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// tgPrefix starts the names of every target group of the Service.
func (n names) tgPrefix() string { return "k8s-" + n.hash + "-" }

// targetGroup names the IPv4 target group of one listener port, protocol
// and target type: k8s-<hash>-<port>-<protocol>-<i|p> (instance or ip), at
// most 29 characters.
func (n names) targetGroup(port int32, protocol, targetType string) string {
	return n.targetGroupOf(port, protocol, targetType, familyIPv4)
}

// targetGroupOf names the target group of one listener port, protocol,
// target type and IP family: an IPv6 group's name ends in 6 (k8s-<hash>-<port>-<protocol>-p6,
// at most 30 characters), so that a family change makes a new group, as
// AWS cannot change a group's IP address type.
func (n names) targetGroupOf(port int32, protocol, targetType, family string) string {
	kind := "i"
	if targetType == targetIP {
		kind = "p"
	}
	if family == familyIPv6 {
		kind += "6"
	}
	return fmt.Sprintf("%s%d-%s-%s", n.tgPrefix(), port, strings.ToLower(strings.ReplaceAll(protocol, "_", "")), kind)
}

// short keeps the first n letters, digits and dashes of s, lower-cased,
// without leading or trailing dashes.
func short(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		}
	}
	out := b.String()
	if len(out) > n {
		out = out[:n]
	}
	out = strings.Trim(out, "-")
	if out == "" {
		out = "x"
	}
	return out
}
