package annotation

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// ReasonInvalid is the one event reason of every bad annotation value,
// whichever backend reads it.
const ReasonInvalid = "InvalidLoadBalancerAnnotation"

// Name is the name of a Service annotation or Node label. The names are part
// of the user-facing API and never change.
type Name string

// String returns the name.
func (n Name) String() string { return string(n) }

// Get returns the annotation's value in m and whether it is set.
func (n Name) Get(m map[string]string) (string, bool) {
	v, ok := m[string(n)]
	return v, ok
}

// IDFormat describes the IDs an ID annotation takes: a pattern and an
// example, and where to find one, for the error message.
type IDFormat struct {
	Pattern *regexp.Regexp
	// Example is a well-formed ID, e.g. sg-0123456789abcdef0.
	Example string
	// Hint says where to find one, e.g. "`openstack subnet list`".
	Hint string
}

// UUID is the format of OpenStack's IDs.
var UUID = IDFormat{
	Pattern: regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`),
	Example: "3b1f2c4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
}

// Reader reads one object's annotations and collects every bad value, so
// that a user sees all of them in one event. Each reader method leaves its
// out parameter alone unless the annotation is set and valid, and reports
// whether it set it; a bad value is recorded, naming the annotation, its
// value and what it must be.
type Reader struct {
	values map[string]string
	errs   []error
}

// NewReader reads the given annotations (an object's metadata.annotations).
func NewReader(annotations map[string]string) *Reader {
	return &Reader{values: annotations}
}

// Invalid records that annotation n has a bad value and says what it must
// be. Backends call it for checks across annotations.
func (r *Reader) Invalid(n Name, value, want string) {
	r.errs = append(r.errs, fmt.Errorf("annotation %s=%q: %s", n, value, want))
}

// Err returns nil when every annotation read was valid, else one
// backends.UserError with reason ReasonInvalid listing every problem.
func (r *Reader) Err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return backends.NewUserError(ReasonInvalid, problems(r.errs))
}

// problems joins errors with "; ", so an event stays on one line.
type problems []error

func (p problems) Error() string {
	msgs := make([]string, len(p))
	for i, e := range p {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns each problem.
func (p problems) Unwrap() []error { return p }

// Has reports whether annotation n is set.
func (r *Reader) Has(n Name) bool {
	_, ok := r.values[string(n)]
	return ok
}

// String reads a non-empty string (surrounding white space removed).
func (r *Reader) String(n Name, out *string) bool {
	v, ok := r.values[string(n)]
	if !ok {
		return false
	}
	if strings.TrimSpace(v) == "" {
		r.Invalid(n, v, "must not be empty; set a value or remove the annotation")
		return false
	}
	*out = strings.TrimSpace(v)
	return true
}

// Bool reads "true" or "false".
func (r *Reader) Bool(n Name, out *bool) bool {
	v, ok := r.values[string(n)]
	if !ok {
		return false
	}
	switch strings.TrimSpace(v) {
	case "true":
		*out = true
	case "false":
		*out = false
	default:
		r.Invalid(n, v, `must be "true" or "false"`)
		return false
	}
	return true
}

// Int reads a whole number from lo to hi.
func (r *Reader) Int(n Name, lo, hi int, out *int) bool {
	v, ok := r.values[string(n)]
	if !ok {
		return false
	}
	i, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || i < lo || i > hi {
		r.Invalid(n, v, fmt.Sprintf("must be a whole number from %d to %d", lo, hi))
		return false
	}
	*out = i
	return true
}

// Duration reads a Go duration (e.g. 30s, 5m) from lo to hi. A bare whole
// number is taken as seconds, as the upstream providers' annotations are.
func (r *Reader) Duration(n Name, lo, hi time.Duration, out *time.Duration) bool {
	v, ok := r.values[string(n)]
	if !ok {
		return false
	}
	s := strings.TrimSpace(v)
	d, err := time.ParseDuration(s)
	if secs, aerr := strconv.Atoi(s); aerr == nil {
		d, err = time.Duration(secs)*time.Second, nil
	}
	if err != nil || d < lo || d > hi {
		r.Invalid(n, v, fmt.Sprintf("must be a duration from %s to %s, e.g. %s (a bare number is seconds)", lo, hi, lo))
		return false
	}
	*out = d
	return true
}

// Enum reads one of the allowed values, compared exactly.
func (r *Reader) Enum(n Name, out *string, allowed ...string) bool {
	v, ok := r.values[string(n)]
	if !ok {
		return false
	}
	for _, a := range allowed {
		if strings.TrimSpace(v) == a {
			*out = a
			return true
		}
	}
	r.Invalid(n, v, "must be one of "+strings.Join(allowed, ", "))
	return false
}

// List reads a comma-separated list of non-empty entries (white space
// around each removed).
func (r *Reader) List(n Name, out *[]string) bool {
	v, ok := r.values[string(n)]
	if !ok {
		return false
	}
	list, err := splitList(v)
	if err != nil {
		r.Invalid(n, v, err.Error())
		return false
	}
	*out = list
	return true
}

func splitList(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, errors.New("must not be empty; give a comma-separated list or remove the annotation")
	}
	parts := strings.Split(v, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		if parts[i] == "" {
			return nil, fmt.Errorf("entry %d is empty; separate entries with a single comma", i+1)
		}
	}
	return parts, nil
}

// Map reads comma-separated key=value pairs (e.g. "a=1,b=2"). Keys must be
// unique and non-empty; values may be empty.
func (r *Reader) Map(n Name, out *map[string]string) bool {
	var list []string
	if !r.List(n, &list) {
		return false
	}
	m := make(map[string]string, len(list))
	for _, kv := range list {
		k, val, found := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		switch {
		case !found || k == "":
			r.Invalid(n, r.values[string(n)], fmt.Sprintf("entry %q is not key=value; write e.g. key1=value1,key2=value2", kv))
			return false
		case hasKey(m, k):
			r.Invalid(n, r.values[string(n)], fmt.Sprintf("key %q is given twice", k))
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

// CIDRs reads a comma-separated list of CIDR prefixes (e.g.
// 10.0.0.0/8,2001:db8::/32), each in canonical form (no host bits set).
func (r *Reader) CIDRs(n Name, out *[]netip.Prefix) bool {
	var list []string
	if !r.List(n, &list) {
		return false
	}
	prefixes := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			r.Invalid(n, r.values[string(n)], fmt.Sprintf("%q is not a CIDR prefix; write e.g. 10.0.0.0/8", s))
			return false
		}
		if p != p.Masked() {
			r.Invalid(n, r.values[string(n)], fmt.Sprintf("%q has host bits set; write %s", s, p.Masked()))
			return false
		}
		prefixes = append(prefixes, p)
	}
	*out = prefixes
	return true
}

// LoadBalancerIPs reads the LoadBalancerIPs annotation as
// ParseLoadBalancerIPs does: at most one usable address per IP family.
func (r *Reader) LoadBalancerIPs(out *[]netip.Addr) bool {
	v, ok := r.values[string(LoadBalancerIPs)]
	if !ok {
		return false
	}
	ips, err := ParseLoadBalancerIPs(v)
	if err != nil {
		r.errs = append(r.errs, err)
		return false
	}
	*out = ips
	return true
}

// ID reads one ID of the given format.
func (r *Reader) ID(n Name, f IDFormat, out *string) bool {
	var id string
	if !r.String(n, &id) {
		return false
	}
	if !f.Pattern.MatchString(id) {
		r.Invalid(n, r.values[string(n)], f.want())
		return false
	}
	*out = id
	return true
}

// IDs reads a comma-separated list of IDs of the given format, without
// repeats.
func (r *Reader) IDs(n Name, f IDFormat, out *[]string) bool {
	var list []string
	if !r.List(n, &list) {
		return false
	}
	seen := make(map[string]bool, len(list))
	for _, id := range list {
		if !f.Pattern.MatchString(id) {
			r.Invalid(n, r.values[string(n)], fmt.Sprintf("entry %q: %s", id, f.want()))
			return false
		}
		if seen[id] {
			r.Invalid(n, r.values[string(n)], fmt.Sprintf("%s is listed twice", id))
			return false
		}
		seen[id] = true
	}
	*out = list
	return true
}

func (f IDFormat) want() string {
	s := "must be an ID like " + f.Example
	if f.Hint != "" {
		s += "; find it with " + f.Hint
	}
	return s
}
