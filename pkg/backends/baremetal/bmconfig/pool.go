package bmconfig

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/addrpool"
)

// Pool is a validated address pool from the config. It is immutable; the
// backend keeps the allocation state apart.
type Pool struct {
	// Name is the pool's name.
	Name string
	// AutoAssign is the AddressPool's autoAssign, defaulted.
	AutoAssign bool
	// Namespaces is nil when no namespace list is set.
	Namespaces map[string]bool
	// NamespaceSelectors and ServiceSelectors are MetalLB's
	// serviceAllocation selectors.
	NamespaceSelectors []labels.Selector
	ServiceSelectors   []labels.Selector
	// Priority orders pools with a service allocation; 0 is unset.
	Priority int
	// Entries are the pool's CIDRs and ranges, in config order.
	Entries []addrpool.Entry
}

// restricted reports whether the pool has a service allocation
// (namespaces, selectors or a priority), as MetalLB's serviceAllocation:
// such pools are tried before the others.
func (p *Pool) restricted() bool {
	return p.Namespaces != nil || len(p.NamespaceSelectors) > 0 || len(p.ServiceSelectors) > 0 || p.Priority != 0
}

// Target is what a pool's service allocation looks at.
type Target struct {
	// Namespace is the Service's namespace.
	Namespace string
	// NamespaceLabels are the namespace's labels; nil when unknown.
	NamespaceLabels map[string]string
	// Labels are the Service's labels.
	Labels map[string]string
}

// Allows reports whether a Service may use the pool: its namespace is
// listed or its labels match a namespace selector (when either is set),
// and its labels match a service selector (when set).
func (p *Pool) Allows(t Target) bool {
	nsOK := p.Namespaces == nil && len(p.NamespaceSelectors) == 0
	if p.Namespaces[t.Namespace] || anyMatches(p.NamespaceSelectors, t.NamespaceLabels) {
		nsOK = true
	}
	return nsOK && (len(p.ServiceSelectors) == 0 || anyMatches(p.ServiceSelectors, t.Labels))
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

// Allocation describes the pool's service allocation for error messages.
func (p *Pool) Allocation() string {
	var parts []string
	if p.Namespaces != nil {
		parts = append(parts, fmt.Sprintf("namespaces %v", p.namespaceList()))
	}
	for _, s := range p.NamespaceSelectors {
		parts = append(parts, fmt.Sprintf("namespaces labelled %q", s.String()))
	}
	ns := strings.Join(parts, " or ")
	var svc []string
	for _, s := range p.ServiceSelectors {
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
func (p *Pool) namespaceList() []string {
	out := make([]string, 0, len(p.Namespaces))
	for ns := range p.Namespaces {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// ComparePools orders pools as MetalLB does: pools with a service
// allocation first, those with a priority by priority (lower first), then
// those without; then the pools without a service allocation. Equal pools
// compare 0, so a stable sort keeps config order among them.
func ComparePools(a, b *Pool) int {
	rank := func(p *Pool) int {
		switch {
		case p.restricted() && p.Priority != 0:
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
		return a.Priority - b.Priority
	}
	return 0
}
