package baremetal

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// pool is a validated address pool from the config. It is immutable; the
// allocation state lives in poolState.
type pool struct {
	name       string
	autoAssign bool
	// namespaces is nil when any namespace may use the pool.
	namespaces map[string]bool
	entries    []poolEntry
}

// allows reports whether Services in namespace may use the pool.
func (p *pool) allows(namespace string) bool {
	return p.namespaces == nil || p.namespaces[namespace]
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
	var byFam [2][]addrRange
	for _, e := range p.entries {
		i := familyIndex(familyOf(e.usable.first))
		byFam[i] = append(byFam[i], e.usable)
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
		if e.extent.contains(ip) {
			return true
		}
	}
	return false
}
