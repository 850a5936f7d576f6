package aws

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// reader is the shared annotation.Reader (every bad value collected into
// one InvalidLoadBalancerAnnotation event) with the forms only AWS's
// annotations take: upstream's key lists, case-insensitive enums and
// 32-bit numbers.
type reader struct {
	*annotation.Reader
	values map[string]string
}

func newReader(annotations map[string]string) *reader {
	return &reader{Reader: annotation.NewReader(annotations), values: annotations}
}

// raw returns the annotation's value as written.
func (r *reader) raw(n annotation.Name) string { return r.values[string(n)] }

// int32 reads a whole number from lo to hi.
func (r *reader) int32(n annotation.Name, lo, hi int, out *int32) bool {
	var i int
	if !r.Int(n, lo, hi, &i) {
		return false
	}
	*out = int32(i) //nolint:gosec // from lo to hi, both small.
	return true
}

// enumFold reads one of the allowed values in any case and returns the
// allowed spelling.
func (r *reader) enumFold(n annotation.Name, out *string, allowed ...string) bool {
	v, ok := n.Get(r.values)
	if !ok {
		return false
	}
	for _, a := range allowed {
		if strings.EqualFold(strings.TrimSpace(v), a) {
			*out = a
			return true
		}
	}
	r.Invalid(n, v, "must be one of "+strings.Join(allowed, ", "))
	return false
}

// pairs reads upstream's "Key1=Val1,Key2=,Key3" lists: a key alone has
// the empty value; empty entries are skipped.
func (r *reader) pairs(n annotation.Name, out *map[string]string) bool {
	v, ok := n.Get(r.values)
	if !ok {
		return false
	}
	m := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, val, _ := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); k == "" {
			r.Invalid(n, v, fmt.Sprintf("entry %q has no key; write e.g. key1=value1,key2", kv))
			return false
		}
		m[k] = strings.TrimSpace(val)
	}
	*out = m
	return true
}

// readAdditionalTags reads AnnotationAdditionalTags; the backend's own
// tags are refused.
func readAdditionalTags(r *reader) map[string]string {
	var tags map[string]string
	if !r.pairs(AnnotationAdditionalTags, &tags) {
		return nil
	}
	for k := range tags {
		if strings.HasPrefix(k, tagClusterPrefix) || k == tagService || k == tagBackend || strings.HasPrefix(k, "aws:") {
			r.Invalid(AnnotationAdditionalTags, r.raw(AnnotationAdditionalTags), fmt.Sprintf("tag %q is the backend's own (or AWS's); choose another key", k))
			return nil
		}
	}
	return tags
}

// NLB health-check limits (ELBv2 API reference, network load balancers).
const (
	minHCInterval, maxHCInterval   = 5, 300
	minHCTimeout, maxHCTimeout     = 2, 120
	minHCThreshold, maxHCThreshold = 2, 10
	maxHCPathLength                = 1024
	// cloud-provider-aws v1.37.1's defaults (buildNLBHealthCheckConfiguration),
	// so adopting one of its NLBs modifies no health check: TCP every 30 s,
	// 3 checks either way; for externalTrafficPolicy Local, HTTP on the
	// health-check NodePort every 10 s, 2 checks either way. Upstream sends
	// no timeout, so AWS's apply: 10 s for TCP and HTTPS, 6 s for HTTP.
	defaultHCInterval, defaultHCHealthy, defaultHCUnhealthy = 30, 3, 3
	localHCInterval, localHCHealthy, localHCUnhealthy       = 10, 2, 2
	defaultHCTimeout, defaultHCTimeoutHTTP                  = 10, 6
)

// readHealthCheck overrides the default health check (hc) with the
// Service's health-check annotations.
func readHealthCheck(r *reader, hc healthCheck) healthCheck {
	if r.enumFold(AnnotationHealthCheckProtocol, &hc.protocol, "TCP", "HTTP", "HTTPS") && hc.protocol != "TCP" && hc.path == "" {
		hc.path = "/"
	}
	if v, ok := AnnotationHealthCheckPort.Get(r.values); ok {
		port := strings.TrimSpace(v)
		if n, err := strconv.Atoi(port); port != "traffic-port" && (err != nil || n < 1 || n > 65535) {
			r.Invalid(AnnotationHealthCheckPort, v, "must be traffic-port or a port number from 1 to 65535")
		} else if port != "traffic-port" {
			hc.port = strconv.Itoa(n) // as AWS stores it: 08080 and +8080 are 8080.
		} else {
			hc.port = port
		}
	}
	if v, ok := AnnotationHealthCheckPath.Get(r.values); ok && hc.protocol != "TCP" {
		if !strings.HasPrefix(v, "/") || len(v) > maxHCPathLength || strings.ContainsAny(v, " \t\n") {
			r.Invalid(AnnotationHealthCheckPath, v, fmt.Sprintf("must be a path starting with / of at most %d characters, without white space", maxHCPathLength))
		} else {
			hc.path = v
		}
	}
	if hc.protocol == "TCP" {
		hc.path = ""
	}
	hc.timeout = defaultHCTimeout
	if hc.protocol == "HTTP" {
		hc.timeout = defaultHCTimeoutHTTP
	}
	r.int32(AnnotationHealthCheckInterval, minHCInterval, maxHCInterval, &hc.interval)
	r.int32(AnnotationHealthCheckTimeout, minHCTimeout, maxHCTimeout, &hc.timeout)
	r.int32(AnnotationHealthyThreshold, minHCThreshold, maxHCThreshold, &hc.healthy)
	r.int32(AnnotationUnhealthyThreshold, minHCThreshold, maxHCThreshold, &hc.unhealthy)
	return hc
}

// securityGroupID is the format of security-group IDs.
var securityGroupID = annotation.IDFormat{
	Pattern: regexp.MustCompile(`^sg-([0-9a-f]{8}|[0-9a-f]{17})$`),
	Example: "sg-0123456789abcdef0",
	Hint:    "`aws ec2 describe-security-groups`",
}

// readSecurityGroups reads the security-group annotations into d.
func readSecurityGroups(r *reader, d *desiredLB) {
	r.IDs(AnnotationSecurityGroups, securityGroupID, &d.byoSGs)
	r.IDs(AnnotationExtraSecurityGroups, securityGroupID, &d.extraSGs)
	d.manageBackend = len(d.byoSGs) == 0
	r.Bool(AnnotationManageBackendSGRules, &d.manageBackend)
	for _, id := range d.extraSGs {
		if slices.Contains(d.byoSGs, id) {
			r.Invalid(AnnotationExtraSecurityGroups, r.raw(AnnotationExtraSecurityGroups), fmt.Sprintf("%s is already in %s; list it once", id, AnnotationSecurityGroups))
		}
	}
}

// defaultSSLPolicy is AWS's security policy for TLS listeners made
// through its API without one.
const defaultSSLPolicy = "ELBSecurityPolicy-2016-08"

// certificateARN is the format of ACM and IAM certificate ARNs.
var certificateARN = annotation.IDFormat{
	Pattern: regexp.MustCompile(`^arn:aws[a-z-]*:(acm:[a-z0-9-]+:[0-9]{12}:certificate/[0-9a-zA-Z-]+|iam::[0-9]{12}:server-certificate/[\w+=,.@/-]+)$`),
	Example: "arn:aws:acm:eu-west-1:123456789012:certificate/12345678-1234-1234-1234-123456789012",
	Hint:    "`aws acm list-certificates`",
}

// tlsConfig is what the TLS annotations ask for.
type tlsConfig struct {
	cert, policy string
	// ports are the Service port numbers and names to terminate TLS on;
	// nil: every TCP port.
	ports      []string
	backendTLS bool
}

// wants reports whether port p gets a TLS listener: a TCP port listed
// (every TCP port without a list). c may be nil.
func (c *tlsConfig) wants(p *desiredPort) bool {
	if c == nil || p.protocol != "TCP" {
		return false
	}
	return c.ports == nil || slices.Contains(c.ports, strconv.Itoa(int(p.port))) || slices.ContainsFunc(p.names, func(n string) bool { return n != "" && slices.Contains(c.ports, n) })
}

// readTLS reads the TLS annotations: nil without AnnotationSSLCert (the
// others are then ignored, as upstream does).
func readTLS(r *reader, svc *corev1.Service) *tlsConfig {
	c := &tlsConfig{policy: defaultSSLPolicy}
	proto := "tcp"
	r.enumFold(AnnotationBackendProtocol, &proto, "tcp", "ssl", "http", "https")
	c.backendTLS = proto == "ssl"
	r.String(AnnotationSSLNegotiationPolicy, &c.policy)
	if r.Has(AnnotationSSLPorts) && strings.TrimSpace(r.raw(AnnotationSSLPorts)) != "*" && r.List(AnnotationSSLPorts, &c.ports) {
		checkSSLPorts(r, svc, c.ports)
	}
	if !r.ID(AnnotationSSLCert, certificateARN, &c.cert) {
		return nil
	}
	return c
}

// checkSSLPorts refuses entries that are not a TCP-only port of the
// Service.
func checkSSLPorts(r *reader, svc *corev1.Service, ports []string) {
	for _, want := range ports {
		var tcp, udp bool
		for _, p := range svc.Spec.Ports {
			if want == strconv.Itoa(int(p.Port)) || (p.Name != "" && want == p.Name) {
				tcp, udp = tcp || p.Protocol == corev1.ProtocolTCP, udp || p.Protocol == corev1.ProtocolUDP || hasUDPOn(svc, p.Port)
			}
		}
		switch {
		case !tcp:
			r.Invalid(AnnotationSSLPorts, r.raw(AnnotationSSLPorts), fmt.Sprintf("%s is not a TCP port of the Service (by number or name)", want))
		case udp:
			r.Invalid(AnnotationSSLPorts, r.raw(AnnotationSSLPorts), fmt.Sprintf("port %s is also served over UDP (one TCP_UDP listener), which cannot be TLS", want))
		}
	}
}

func hasUDPOn(svc *corev1.Service, port int32) bool {
	return slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port && p.Protocol == corev1.ProtocolUDP })
}
