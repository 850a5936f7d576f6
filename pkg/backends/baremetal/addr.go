package baremetal

import (
	"fmt"
	"math/bits"
	"net/netip"
	"strings"
)

// addrRange is an inclusive range of addresses of one family.
type addrRange struct {
	first, last netip.Addr
}

// contains reports whether ip lies in the range.
func (r addrRange) contains(ip netip.Addr) bool {
	return ip.BitLen() == r.first.BitLen() && r.first.Compare(ip) <= 0 && ip.Compare(r.last) <= 0
}

// size is the number of addresses in the range, saturated at 2^64-1.
func (r addrRange) size() uint64 {
	hi, lo := u128(r.last)
	fhi, flo := u128(r.first)
	lo, borrow := bits.Sub64(lo, flo, 0)
	hi, _ = bits.Sub64(hi, fhi, borrow)
	if hi != 0 || lo == ^uint64(0) {
		return ^uint64(0)
	}
	return lo + 1
}

func (r addrRange) String() string {
	if r.first == r.last {
		return r.first.String()
	}
	return r.first.String() + "-" + r.last.String()
}

// u128 returns an address as a 128-bit number (IPv4 in the low 32 bits).
func u128(ip netip.Addr) (hi, lo uint64) {
	b := ip.As16()
	if ip.Is4() {
		v := ip.As4()
		return 0, uint64(v[0])<<24 | uint64(v[1])<<16 | uint64(v[2])<<8 | uint64(v[3])
	}
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[i+8])
	}
	return hi, lo
}

// poolEntry is one parsed entry of an address pool's addresses list.
type poolEntry struct {
	// extent is everything the entry names, used to find overlaps.
	extent addrRange
	// usable is what the pool hands out: the extent, less the network and
	// broadcast addresses of an IPv4 CIDR of /30 or shorter.
	usable addrRange
}

// parsePoolEntry parses a CIDR ("192.0.2.0/28", "2001:db8::/120") or an
// inclusive range ("198.51.100.10-198.51.100.20").
func parsePoolEntry(s string) (poolEntry, error) {
	s = strings.TrimSpace(s)
	if first, last, ok := strings.Cut(s, "-"); ok {
		return parseRange(strings.TrimSpace(first), strings.TrimSpace(last))
	}
	if strings.Contains(s, "/") {
		return parseCIDR(s)
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		return poolEntry{}, fmt.Errorf("%q is a single address; write it as %s", s, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return poolEntry{}, fmt.Errorf("%q is neither a CIDR (192.0.2.0/28) nor a range (192.0.2.10-192.0.2.20)", s)
}

func parseRange(a, b string) (poolEntry, error) {
	first, err := parsePoolAddr(a)
	if err != nil {
		return poolEntry{}, err
	}
	last, err := parsePoolAddr(b)
	if err != nil {
		return poolEntry{}, err
	}
	if first.Is4() != last.Is4() {
		return poolEntry{}, fmt.Errorf("range %s-%s mixes IPv4 and IPv6; write one range per family", first, last)
	}
	if last.Less(first) {
		return poolEntry{}, fmt.Errorf("range %s-%s ends before it starts; write %s-%s", first, last, last, first)
	}
	r := addrRange{first: first, last: last}
	return poolEntry{extent: r, usable: r}, nil
}

func parseCIDR(s string) (poolEntry, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return poolEntry{}, fmt.Errorf("%q is not a valid CIDR: %w", s, err)
	}
	if err := checkPoolAddr(p.Addr(), s); err != nil {
		return poolEntry{}, err
	}
	if p.Masked() != p {
		return poolEntry{}, fmt.Errorf("%q has host bits set; did you mean %s?", s, p.Masked())
	}
	r := addrRange{first: p.Addr(), last: lastAddr(p)}
	e := poolEntry{extent: r, usable: r}
	if p.Addr().Is4() && p.Bits() <= 30 {
		e.usable = addrRange{first: r.first.Next(), last: r.last.Prev()}
	}
	return e, nil
}

// lastAddr is the highest address of a masked prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	ip, _ := netip.AddrFromSlice(b)
	return ip
}

func parsePoolAddr(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	return ip, checkPoolAddr(ip, s)
}

// checkPoolAddr rejects addresses that cannot be load-balancer addresses.
func checkPoolAddr(ip netip.Addr, s string) error {
	switch {
	case ip.Zone() != "":
		return fmt.Errorf("%q has a zone; remove %%%s", s, ip.Zone())
	case ip.Is4In6():
		return fmt.Errorf("%q is IPv4-mapped IPv6; write the IPv4 address %s", s, ip.Unmap())
	case ip.IsUnspecified(), ip.IsLoopback(), ip.IsMulticast(), ip.IsLinkLocalUnicast(), ip.IsInterfaceLocalMulticast():
		return fmt.Errorf("%q is an unspecified, loopback, multicast or link-local address, which cannot be load-balancer addresses", s)
	}
	return nil
}
