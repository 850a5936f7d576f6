package svcstate

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// Record is the set of backends that may hold a Service's load balancer.
type Record struct {
	// Known is false when the Service carries no record at all.
	Known bool
	Names []string
}

// ParseRecord reads the Service's multicloud-ccm.io/load-balancer-backends.
func ParseRecord(svc *corev1.Service) Record {
	v, ok := svc.Annotations[string(annotation.LoadBalancerBackends)]
	if !ok {
		return Record{}
	}
	rec := Record{Known: true}
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(rec.Names, n) {
			rec.Names = append(rec.Names, n)
		}
	}
	slices.Sort(rec.Names)
	return rec
}

// Has reports whether the record names the backend.
func (rec Record) Has(name string) bool { return slices.Contains(rec.Names, name) }

// With returns the record with the named backends added (each once).
func (rec Record) With(names ...string) Record {
	out := Record{Known: true, Names: slices.Clone(rec.Names)}
	for _, n := range names {
		if !out.Has(n) {
			out.Names = append(out.Names, n)
		}
	}
	slices.Sort(out.Names)
	return out
}

// Without returns the record without the named backends.
func (rec Record) Without(names ...string) Record {
	out := Record{Known: true}
	for _, n := range rec.Names {
		if !slices.Contains(names, n) {
			out.Names = append(out.Names, n)
		}
	}
	return out
}

// Value is the record as the annotation's value.
func (rec Record) Value() string { return strings.Join(rec.Names, ",") }

// SetAnnotation adds to changes what makes cur's annotation name say value
// ("": absent), if it does not already.
func SetAnnotation(changes map[annotation.Name]*string, cur *corev1.Service, name annotation.Name, value string) {
	got, ok := cur.Annotations[string(name)]
	switch {
	case value == "" && ok:
		changes[name] = nil
	case value != "" && got != value:
		changes[name] = ptr.To(value)
	}
}

// SplitNames reads a comma-separated backend list: names trimmed, empty
// ones dropped, in order.
func SplitNames(v string) []string {
	var out []string
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// NamesInOrder returns the backends' names in their order.
func NamesInOrder(bs []*backend.Member) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out
}
