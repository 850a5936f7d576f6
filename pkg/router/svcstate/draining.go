package svcstate

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// Draining is the Service's multicloud-ccm.io/load-balancer-draining:
// per backend, when its drain ends.
type Draining map[string]time.Time

// ParseDraining reads the Service's draining record; entries that cannot
// be read are left out (their backend is then retired as without a drain).
func ParseDraining(svc *corev1.Service) Draining {
	return ParseDrainingValue(svc.Annotations[string(annotation.LoadBalancerDraining)])
}

// ParseDrainingValue reads a draining record's annotation value.
func ParseDrainingValue(v string) Draining {
	out := Draining{}
	for _, e := range SplitNames(v) {
		name, at, ok := strings.Cut(e, "=")
		if !ok {
			continue
		}
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(at)); err == nil {
			out[strings.TrimSpace(name)] = t
		}
	}
	return out
}

// HasAny reports whether any of bs is draining.
func (d Draining) HasAny(bs []*backend.Member) bool {
	for _, b := range bs {
		if _, ok := d[b.Name]; ok {
			return true
		}
	}
	return false
}

// Without returns the record without the named backends.
func (d Draining) Without(names ...string) Draining {
	out := Draining{}
	for n, t := range d {
		if !slices.Contains(names, n) {
			out[n] = t
		}
	}
	return out
}

// KeepOnly returns the entries of the backends named.
func (d Draining) KeepOnly(names []string) Draining {
	out := Draining{}
	for n, t := range d {
		if slices.Contains(names, n) {
			out[n] = t
		}
	}
	return out
}

// Value is the annotation's value, by backend name ("": no drain).
func (d Draining) Value() string {
	keys := make([]string, 0, len(d))
	for n := range d {
		keys = append(keys, n)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, n := range keys {
		parts = append(parts, n+"="+d[n].UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, ",")
}

// Next returns the earliest end, and false for an empty record.
func (d Draining) Next() (time.Time, bool) {
	var first time.Time
	for _, t := range d {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first, !first.IsZero()
}
