package aws

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// reader reads a Service's annotations and collects every bad value, so a
// user sees all of them in one InvalidLoadBalancerAnnotation event. Each
// method leaves its out parameter alone unless the annotation is set and
// valid, and reports whether it set it.
type reader struct {
	values map[string]string
	errs   []error
}

func newReader(annotations map[string]string) *reader { return &reader{values: annotations} }

// invalid records a bad value of annotation n and what it must be.
func (r *reader) invalid(n, value, want string) {
	r.errs = append(r.errs, fmt.Errorf("annotation %s=%q: %s", n, value, want))
}

// err is nil when every annotation read was valid, else one user error
// listing every problem.
func (r *reader) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return backends.NewUserError(reasonInvalidAnnotation, errors.Join(r.errs...))
}

// intRange reads a whole number from lo to hi.
func (r *reader) intRange(n string, lo, hi int32, out *int32) bool {
	v, ok := r.values[n]
	if !ok {
		return false
	}
	i, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || int32(i) < lo || int32(i) > hi {
		r.invalid(n, v, fmt.Sprintf("must be a whole number from %d to %d", lo, hi))
		return false
	}
	*out = int32(i)
	return true
}

// enum reads one of the allowed values; fold compares without case and
// returns the allowed spelling.
func (r *reader) enum(n string, fold bool, out *string, allowed ...string) bool {
	v, ok := r.values[n]
	if !ok {
		return false
	}
	for _, a := range allowed {
		if strings.TrimSpace(v) == a || (fold && strings.EqualFold(strings.TrimSpace(v), a)) {
			*out = a
			return true
		}
	}
	r.invalid(n, v, "must be one of "+strings.Join(allowed, ", "))
	return false
}

// keyValues reads comma-separated key=value pairs ("a=1,b=2"); keys are
// unique and non-empty.
func (r *reader) keyValues(n string, out *map[string]string) bool {
	v, ok := r.values[n]
	if !ok {
		return false
	}
	m := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, found := strings.Cut(strings.TrimSpace(kv), "=")
		k = strings.TrimSpace(k)
		switch {
		case !found || k == "":
			r.invalid(n, v, fmt.Sprintf("entry %q is not key=value; write e.g. key1=value1,key2=value2", kv))
			return false
		case hasKey(m, k):
			r.invalid(n, v, fmt.Sprintf("key %q is given twice", k))
			return false
		}
		m[k] = strings.TrimSpace(val)
	}
	*out = m
	return true
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// pairs reads upstream's "Key1=Val1,Key2=,Key3" lists: a key alone has
// the empty value.
func (r *reader) pairs(n string, out *map[string]string) bool {
	v, ok := r.values[n]
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
			r.invalid(n, v, fmt.Sprintf("entry %q has no key; write e.g. key1=value1,key2", kv))
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
			r.invalid(AnnotationAdditionalTags, r.values[AnnotationAdditionalTags], fmt.Sprintf("tag %q is the backend's own (or AWS's); choose another key", k))
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
	if r.enum(AnnotationHealthCheckProtocol, true, &hc.protocol, "TCP", "HTTP", "HTTPS") && hc.protocol != "TCP" && hc.path == "" {
		hc.path = "/"
	}
	if v, ok := r.values[AnnotationHealthCheckPort]; ok {
		port := strings.TrimSpace(v)
		if n, err := strconv.Atoi(port); port != "traffic-port" && (err != nil || n < 1 || n > 65535) {
			r.invalid(AnnotationHealthCheckPort, v, "must be traffic-port or a port number from 1 to 65535")
		} else {
			hc.port = port
		}
	}
	if v, ok := r.values[AnnotationHealthCheckPath]; ok && hc.protocol != "TCP" {
		if !strings.HasPrefix(v, "/") || len(v) > maxHCPathLength || strings.ContainsAny(v, " \t\n") {
			r.invalid(AnnotationHealthCheckPath, v, fmt.Sprintf("must be a path starting with / of at most %d characters, without white space", maxHCPathLength))
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
	r.intRange(AnnotationHealthCheckInterval, minHCInterval, maxHCInterval, &hc.interval)
	r.intRange(AnnotationHealthCheckTimeout, minHCTimeout, maxHCTimeout, &hc.timeout)
	r.intRange(AnnotationHealthyThreshold, minHCThreshold, maxHCThreshold, &hc.healthy)
	r.intRange(AnnotationUnhealthyThreshold, minHCThreshold, maxHCThreshold, &hc.unhealthy)
	return hc
}
