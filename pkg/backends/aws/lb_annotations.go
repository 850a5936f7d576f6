package aws

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

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
	// AWS's defaults for an NLB's target group, which every target group
	// made before these annotations existed has.
	defaultHCInterval, defaultHCHealthy, defaultHCUnhealthy = 30, 5, 2
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
