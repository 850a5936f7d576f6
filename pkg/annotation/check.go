package annotation

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Check reads value as the annotation's readers do and returns their
// message for a bad value, nil for a good one. backends are the configured
// backends with load balancers, for KindBackends (nil: names are not
// checked). KindUnchecked values are always good.
func (s Spec) Check(value string, backends []string) error {
	if s.Kind == KindBackends {
		_, err := ParseLoadBalancerBackends(value, backends)
		return err
	}
	if f, ok := parsers[s.Kind]; ok {
		return f(value)
	}
	r := NewReader(map[string]string{string(s.Name): value})
	s.read(r, value)
	if len(r.errs) == 0 {
		return nil
	}
	return problems(r.errs)
}

// CheckService is Check of the annotation's value on a Service with these
// annotations (which hold it) and externalTrafficPolicy (local: Local):
// nil when the backend does not read the value for that Service
// (HTTPHealthCheckOnly without an HTTP health check).
func (s Spec) CheckService(annotations map[string]string, local bool, backends []string) error {
	return s.CheckIn(annotations, local, Cluster{Backends: backends})
}

// Cluster is what the readers' verdicts depend on beyond the Service: the
// configured backends with load balancers (nil: names are not checked) and
// whether a bare-metal backend announces through kube-vip (its config's
// announce: kube-vip), under which kube-vip's address annotation is a
// request of that backend (Spec.KubeVIPMark).
type Cluster struct {
	Backends []string
	KubeVIP  bool
}

// CheckIn is CheckService in the cluster c: with c.KubeVIP, a
// Spec.KubeVIPMark annotation the user wrote (the Service does not carry
// the mark "true") is read as the bare-metal backend reads its request
// (ParseKubeVIPIPs).
func (s Spec) CheckIn(annotations map[string]string, local bool, c Cluster) error {
	if s.HTTPHealthCheckOnly && !HTTPHealthCheck(annotations, local) {
		return nil
	}
	if s.KubeVIPRequest(annotations, c) {
		_, err := ParseKubeVIPIPs(s.Name, annotations[string(s.Name)])
		return err
	}
	return s.Check(annotations[string(s.Name)], c.Backends)
}

// KubeVIPRequest reports whether the annotation's value on a Service with
// these annotations is the bare-metal backend's request of addresses in
// the cluster c: a Spec.KubeVIPMark annotation, with c.KubeVIP, without the
// mark "true".
func (s Spec) KubeVIPRequest(annotations map[string]string, c Cluster) bool {
	return s.KubeVIPMark != "" && c.KubeVIP && annotations[string(s.KubeVIPMark)] != "true"
}

// parsers are the kinds read by a Parse function of their own.
var parsers = map[Kind]func(string) error{
	KindLoadBalancerIPs: func(v string) error { _, err := ParseLoadBalancerIPs(v); return err },
	KindSharingKey:      func(v string) error { _, err := ParseAllowSharedIP(v); return err },
	KindDuration:        func(v string) error { _, err := ParseLoadBalancerDrain(v); return err },
}

// read runs the kind's reader on r.
func (s Spec) read(r *Reader, v string) {
	switch s.Kind {
	case KindString:
		s.readString(r, v)
	case KindBool:
		r.Bool(s.Name, new(bool))
	case KindAWSInternal:
		readAWSInternal(r, s.Name, v)
	case KindInt:
		s.readInt(r, v)
	case KindEnum:
		s.readEnum(r, v)
	case KindEnumFold:
		s.readEnumFold(r, v)
	case KindList:
		r.List(s.Name, new([]string))
	case KindUpstreamList:
		if !slices.ContainsFunc(strings.Split(v, ","), func(e string) bool { return strings.TrimSpace(e) != "" }) {
			r.Invalid(s.Name, v, s.Want)
		}
	case KindListOrStar:
		if strings.TrimSpace(v) != "*" {
			r.List(s.Name, new([]string))
		}
	case KindMap:
		r.Map(s.Name, new(map[string]string))
	case KindPairs:
		s.readPairs(r, v)
	case KindID:
		r.ID(s.Name, s.Format, new(string))
	case KindIDs:
		r.IDs(s.Name, s.Format, new([]string))
	default:
		s.readFormat(r, v)
	}
}

// readFormat runs the readers of the address and name kinds.
func (s Spec) readFormat(r *Reader, v string) {
	switch s.Kind {
	case KindIPList:
		if err := checkIPList(v, s.Hostnames); err != nil {
			r.Invalid(s.Name, v, err.Error())
		}
	case KindIPv4s:
		readIPv4s(r, s.Name, v)
	case KindPort:
		if p := strings.TrimSpace(v); p != "traffic-port" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				r.Invalid(s.Name, v, "must be traffic-port or a port number from 1 to 65535")
			}
		}
	case KindHTTPPath:
		if !strings.HasPrefix(v, "/") || len(v) > s.MaxLen || strings.ContainsAny(v, " \t\n") {
			r.Invalid(s.Name, v, fmt.Sprintf("must be a path starting with / of at most %d characters, without white space", s.MaxLen))
		}
	case KindStar:
		if v != "*" {
			r.Invalid(s.Name, v, `must be "*" (proxy protocol v2 on every port)`)
		}
	case KindDNSName:
		var name string
		if r.String(s.Name, &name) && len(validation.IsDNS1123Subdomain(name)) > 0 {
			r.Invalid(s.Name, name, "must be a DNS name such as lb.example.com")
		}
	case KindLabelSelector:
		readLabelSelector(r, s.Name, v)
	}
}

func (s Spec) readString(r *Reader, v string) {
	var t string
	if r.String(s.Name, &t) && s.MaxLen > 0 && len(t) > s.MaxLen {
		r.Invalid(s.Name, s.quoted(v), s.Want)
	}
}

// quoted is the value a message quotes: as written, or trimmed.
func (s Spec) quoted(v string) string {
	if s.Trimmed {
		return strings.TrimSpace(v)
	}
	return v
}

// readInt is Reader.Int, or with Want the same number with its own
// message and exception.
func (s Spec) readInt(r *Reader, v string) {
	if s.Want == "" {
		r.Int(s.Name, s.Min, s.Max, new(int))
		return
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < s.Min || n > s.Max || (s.ExceptSet && n == s.Except) {
		r.Invalid(s.Name, v, s.Want)
	}
}

func (s Spec) readEnum(r *Reader, v string) {
	switch {
	case s.Exact:
		if !slices.Contains(s.Values, v) {
			r.Invalid(s.Name, v, s.want())
		}
	case s.Trimmed:
		if !slices.Contains(s.Values, strings.TrimSpace(v)) {
			r.Invalid(s.Name, strings.TrimSpace(v), s.want())
		}
	default:
		r.Enum(s.Name, new(string), s.Values...)
	}
}

// want is an enum's "must be" text.
func (s Spec) want() string {
	if s.Want != "" {
		return s.Want
	}
	return "must be one of " + strings.Join(s.Values, ", ")
}

func (s Spec) readEnumFold(r *Reader, v string) {
	for _, a := range s.Values {
		if strings.EqualFold(strings.TrimSpace(v), a) {
			return
		}
	}
	r.Invalid(s.Name, v, s.want())
}

// readAWSInternal reads the upstream AWS provider's internal flag: it makes
// the load balancer internal for any value but "false" and the empty
// value, so other spellings of false are refused.
func readAWSInternal(r *Reader, n Name, v string) {
	switch v = strings.TrimSpace(v); v {
	case "false", "", "0.0.0.0/0":
		return
	}
	if internal, err := strconv.ParseBool(v); err == nil && internal {
		return
	}
	r.Invalid(n, v, `must be "true" or "false" (lower case: the upstream provider makes the load balancer internal for any value but "false")`)
}

// readPairs reads the upstream AWS provider's "Key1=Val1,Key2=,Key3"
// lists, refusing the spec's reserved keys.
func (s Spec) readPairs(r *Reader, v string) {
	for _, kv := range strings.Split(v, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, _, _ := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); k == "" {
			r.Invalid(s.Name, v, fmt.Sprintf("entry %q has no key; write e.g. key1=value1,key2", kv))
			return
		}
		if slices.Contains(s.Values, k) || slices.ContainsFunc(s.Prefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			r.Invalid(s.Name, v, fmt.Sprintf("tag %q is the backend's own (or AWS's); choose another key", k))
			return
		}
	}
}

func readIPv4s(r *Reader, n Name, v string) {
	var ips []string
	if !r.List(n, &ips) {
		return
	}
	for _, ip := range ips {
		if p := net.ParseIP(ip); p == nil || p.To4() == nil {
			r.Invalid(n, v, fmt.Sprintf("%q is not an IPv4 address", ip))
			return
		}
	}
}

func readLabelSelector(r *Reader, n Name, v string) {
	var list []string
	if !r.List(n, &list) {
		return
	}
	for _, part := range list {
		key, value, _ := strings.Cut(part, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if len(validation.IsQualifiedName(key)) > 0 || (value != "" && len(validation.IsValidLabelValue(value)) > 0) {
			r.Invalid(n, v, fmt.Sprintf("entry %q is not a label key or key=value; write e.g. env=production, gpu", part))
			return
		}
	}
}

// checkIPList checks a MetalLB or kube-vip address list: comma-separated IP
// addresses (white space around each ignored), at most one per family, and
// with hostnames DNS names too. An empty value asks for nothing.
func checkIPList(value string, hostnames bool) error {
	if strings.TrimSpace(value) == "" {
		return nil
	}
	var seen []netip.Addr
	for i, f := range strings.Split(value, ",") {
		s := strings.TrimSpace(f)
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" || ip.Is4In6() {
			if hostnames && len(validation.IsDNS1123Subdomain(s)) == 0 {
				continue
			}
			return fmt.Errorf("entry %d: %q is not an IP address", i+1, s)
		}
		for _, prev := range seen {
			if prev.Is4() == ip.Is4() {
				return fmt.Errorf("%s and %s are both %s; give at most one address per IP family", prev, ip, familyName(ip))
			}
		}
		seen = append(seen, ip)
	}
	return nil
}

// ParseLoadBalancerBackends parses the value of the LoadBalancerBackend
// annotation as the router reads it: one backend name, or several
// separated by commas, white space around each ignored and empty entries
// dropped; each must be one of known (the backends with load balancers)
// and named once. With known nil the names are not checked, only that
// there is one and none is repeated. The messages are the router's, but
// for its "service <namespace>/<name>: " prefix.
func ParseLoadBalancerBackends(value string, known []string) ([]string, error) {
	var names []string
	for n := range strings.SplitSeq(value, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		names = []string{value}
	}
	sorted := slices.Sorted(slices.Values(known))
	for i, n := range names {
		if strings.TrimSpace(n) == "" || (known != nil && !slices.Contains(known, n)) {
			which := ""
			if len(names) > 1 {
				which = fmt.Sprintf(" (%q)", n)
			}
			return nil, fmt.Errorf("annotation %s=%q names no backend with load balancers%s; use one of %v (or several, comma-separated), or remove the annotation to use the default", LoadBalancerBackend, value, which, sorted)
		}
		if slices.Index(names, n) != i {
			return nil, fmt.Errorf("annotation %s=%q names backend %q twice; name each backend once", LoadBalancerBackend, value, n)
		}
	}
	return names, nil
}

// ParseLoadBalancerDrain parses the value of the LoadBalancerDrain
// annotation as the router reads it: a Go duration (white space around it
// ignored) that is not negative; "0" deletes at once.
func ParseLoadBalancerDrain(value string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(value))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("annotation %s=%q is not a drain period: write a duration such as 5m or 90s, or 0 to delete a load balancer the Service stops using at once", LoadBalancerDrain, value)
	}
	return d, nil
}
