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
	for _, e := range p.entries {
		fs := &ps.fams[familyIndex(familyOf(e.usable.first))]
		fs.ranges = append(fs.ranges, e.usable)
	}
	for i := range ps.fams {
		ps.fams[i].init()
	}
	return ps
}

// hasFamily reports whether the pool holds addresses of family f.
func (ps *poolState) hasFamily(f corev1.IPFamily) bool {
	return len(ps.fams[familyIndex(f)].ranges) > 0
}

// usable reports whether the pool hands out ip.
func (ps *poolState) usable(ip netip.Addr) bool {
	for _, r := range ps.fams[familyIndex(familyOf(ip))].ranges {
		if r.contains(ip) {
			return true
		}
	}
	return false
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

// famState is the state of one IP family of a pool: its usable ranges, how
// many of their addresses are leased, and a next-fit cursor. Allocation
// resumes where the previous one stopped, so it never rescans the pool from
// its start, and a just-released address is handed out again only after the
// cursor has gone round the whole pool.
type famState struct {
	ranges []addrRange
	// size is the number of usable addresses, saturated at 2^64-1.
	size uint64
	// used counts the leased usable addresses.
	used uint64
	// cur indexes ranges; next is the next candidate in ranges[cur].
	cur  int
	next netip.Addr
}

func (fs *famState) init() {
	slices.SortFunc(fs.ranges, func(a, b addrRange) int { return a.first.Compare(b.first) })
	for _, r := range fs.ranges {
		n := r.size()
		if fs.size+n < fs.size {
			fs.size = ^uint64(0)
		} else {
			fs.size += n
		}
	}
	if len(fs.ranges) > 0 {
		fs.next = fs.ranges[0].first
	}
}

// free returns how many usable addresses are not leased.
func (fs *famState) free() uint64 { return fs.size - fs.used }

// pick returns the first address at or after the cursor that taken reports
// free, and moves the cursor past it. Among any used+1 consecutive
// addresses at least one is free, so it probes at most used+1 addresses;
// probes counts them.
func (fs *famState) pick(taken func(netip.Addr) bool, probes *uint64) (netip.Addr, bool) {
	if len(fs.ranges) == 0 || fs.used >= fs.size {
		return netip.Addr{}, false
	}
	for n := uint64(0); n <= fs.used; n++ {
		ip := fs.advance()
		*probes++
		if !taken(ip) {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// advance returns the cursor's address and moves the cursor to the next
// usable address, wrapping from the last range to the first.
func (fs *famState) advance() netip.Addr {
	ip := fs.next
	if ip == fs.ranges[fs.cur].last {
		fs.cur = (fs.cur + 1) % len(fs.ranges)
		fs.next = fs.ranges[fs.cur].first
	} else {
		fs.next = ip.Next()
	}
	return ip
}
