package baremetal

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/addrpool"
)

// pool is a validated address pool from the config. It is immutable; the
// allocation state lives in poolState.
type pool struct {
	name       string
	autoAssign bool
	// namespaces is nil when no namespace list is set.
	namespaces map[string]bool
	// namespaceSelectors and serviceSelectors are MetalLB's
	// serviceAllocation selectors.
	namespaceSelectors []labels.Selector
	serviceSelectors   []labels.Selector
	// priority orders pools with a service allocation; 0 is unset.
	priority int
	entries  []addrpool.Entry
}

// restricted reports whether the pool has a service allocation
// (namespaces, selectors or a priority), as MetalLB's serviceAllocation:
// such pools are tried before the others.
func (p *pool) restricted() bool {
	return p.namespaces != nil || len(p.namespaceSelectors) > 0 || len(p.serviceSelectors) > 0 || p.priority != 0
}

// target is what a pool's service allocation looks at.
type target struct {
	namespace string
	// nsLabels are the namespace's labels; nil when unknown.
	nsLabels map[string]string
	labels   map[string]string
}

// allows reports whether a Service may use the pool: its namespace is
// listed or its labels match a namespace selector (when either is set),
// and its labels match a service selector (when set).
func (p *pool) allows(t target) bool {
	nsOK := p.namespaces == nil && len(p.namespaceSelectors) == 0
	if p.namespaces[t.namespace] || anyMatches(p.namespaceSelectors, t.nsLabels) {
		nsOK = true
	}
	return nsOK && (len(p.serviceSelectors) == 0 || anyMatches(p.serviceSelectors, t.labels))
}

func anyMatches(sels []labels.Selector, l map[string]string) bool {
	if l == nil {
		l = map[string]string{}
	}
	for _, s := range sels {
		if s.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}

// allocation describes the pool's service allocation for error messages.
func (p *pool) allocation() string {
	var parts []string
	if p.namespaces != nil {
		parts = append(parts, fmt.Sprintf("namespaces %v", p.namespaceList()))
	}
	for _, s := range p.namespaceSelectors {
		parts = append(parts, fmt.Sprintf("namespaces labelled %q", s.String()))
	}
	ns := strings.Join(parts, " or ")
	var svc []string
	for _, s := range p.serviceSelectors {
		svc = append(svc, fmt.Sprintf("%q", s.String()))
	}
	switch {
	case len(svc) == 0:
		return "serves only " + ns
	case ns == "":
		return "serves only Services labelled " + strings.Join(svc, " or ")
	}
	return "serves only " + ns + ", and there only Services labelled " + strings.Join(svc, " or ")
}

// namespaceList lists the namespaces the pool serves, sorted.
func (p *pool) namespaceList() []string {
	out := make([]string, 0, len(p.namespaces))
	for ns := range p.namespaces {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// poolOrder is MetalLB's: pools with a service allocation first, those
// with a priority by priority (lower first), then those without; then the
// pools without a service allocation. Config order breaks ties.
func poolOrder(a, b *pool) int {
	rank := func(p *pool) int {
		switch {
		case p.restricted() && p.priority != 0:
			return 0
		case p.restricted():
			return 1
		}
		return 2
	}
	if c := rank(a) - rank(b); c != 0 {
		return c
	}
	if rank(a) == 0 {
		return a.priority - b.priority
	}
	return 0
}

// familyOf maps an address to its IP family.
func familyOf(ip netip.Addr) corev1.IPFamily {
	if ip.Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

func familyIndex(f corev1.IPFamily) int {
	if f == corev1.IPv6Protocol {
		return 1
	}
	return 0
}

// poolState is a pool's allocation state in one backend instance.
type poolState struct {
	*pool
	fams [2]famState
}

func newPoolState(p *pool) *poolState {
	ps := &poolState{pool: p}
	var byFam [2][]addrpool.Range
	for _, e := range p.entries {
		i := familyIndex(familyOf(e.Usable.First))
		byFam[i] = append(byFam[i], e.Usable)
	}
	for i := range ps.fams {
		ps.fams[i] = newFamState(byFam[i])
	}
	return ps
}

// hasFamily reports whether the pool holds addresses of family f.
func (ps *poolState) hasFamily(f corev1.IPFamily) bool {
	return len(ps.fams[familyIndex(f)].ranges) > 0
}

// usable reports whether the pool hands out ip.
func (ps *poolState) usable(ip netip.Addr) bool {
	return ps.fams[familyIndex(familyOf(ip))].find(ip) != nil
}

// covers reports whether ip lies in any entry of the pool, usable or not.
func (ps *poolState) covers(ip netip.Addr) bool {
	for _, e := range ps.entries {
		if e.Extent.Contains(ip) {
			return true
		}
	}
	return false
}
