package baremetal

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/addrpool"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/bmconfig"
)

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
	*bmconfig.Pool
	fams [2]famState
}

func newPoolState(p *bmconfig.Pool) *poolState {
	ps := &poolState{Pool: p}
	var byFam [2][]addrpool.Range
	for _, e := range p.Entries {
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
	for _, e := range ps.Entries {
		if e.Extent.Contains(ip) {
			return true
		}
	}
	return false
}
