// Package addrpool parses the entries of a bare-metal address pool (a CIDR
// or an inclusive range) into ranges of addresses. Package baremetal calls
// it.
//
// It imports the standard library only, so that its fuzz target builds
// quickly: hack/fuzz.sh compiles every dependency of a fuzz target's test
// binary with the fuzzer's instrumentation, and package baremetal's test
// binary depends on client-go and cloud-provider.
package addrpool

import (
	"fmt"
	"math/bits"
	"net/netip"
	"strings"
)

// Range is an inclusive range of addresses of one family.
type Range struct {
	// First and Last are the range's lowest and highest addresses.
	First, Last netip.Addr
}

// Contains reports whether ip lies in the range.
func (r Range) Contains(ip netip.Addr) bool {
	return ip.BitLen() == r.First.BitLen() && r.First.Compare(ip) <= 0 && ip.Compare(r.Last) <= 0
}

// Size is the number of addresses in the range, saturated at 2^64-1.
func (r Range) Size() uint64 {
	hi, lo := U128(r.Last)
	fhi, flo := U128(r.First)
	lo, borrow := bits.Sub64(lo, flo, 0)
	hi, _ = bits.Sub64(hi, fhi, borrow)
	if hi != 0 || lo == ^uint64(0) {
		return ^uint64(0)
	}
	return lo + 1
}

// String writes the range as 192.0.2.1-192.0.2.9, or as one address.
func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// U128 returns an address as a 128-bit number (IPv4 in the low 32 bits).
func U128(ip netip.Addr) (hi, lo uint64) {
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

// Entry is one parsed entry of an address pool's addresses list.
type Entry struct {
	// Extent is everything the entry names, used to find overlaps.
	Extent Range
	// Usable is what the pool hands out: the extent, less the network and
	// broadcast addresses of an IPv4 CIDR of /30 or shorter.
	Usable Range
}

// ParseEntry parses a CIDR ("192.0.2.0/28", "2001:db8::/120") or an
// inclusive range ("198.51.100.10-198.51.100.20").
func ParseEntry(s string) (Entry, error) {
	s = strings.TrimSpace(s)
	if first, last, ok := strings.Cut(s, "-"); ok {
		return parseRange(strings.TrimSpace(first), strings.TrimSpace(last))
	}
	if strings.Contains(s, "/") {
		return parseCIDR(s)
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		return Entry{}, fmt.Errorf("%q is a single address; write it as %s", s, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return Entry{}, fmt.Errorf("%q is neither a CIDR (192.0.2.0/28) nor a range (192.0.2.10-192.0.2.20)", s)
}

func parseRange(a, b string) (Entry, error) {
	first, err := parsePoolAddr(a)
	if err != nil {
		return Entry{}, err
	}
	last, err := parsePoolAddr(b)
	if err != nil {
		return Entry{}, err
	}
	if first.Is4() != last.Is4() {
		return Entry{}, fmt.Errorf("range %s-%s mixes IPv4 and IPv6; write one range per family", first, last)
	}
	if last.Less(first) {
		return Entry{}, fmt.Errorf("range %s-%s ends before it starts; write %s-%s", first, last, last, first)
	}
	r := Range{First: first, Last: last}
	return Entry{Extent: r, Usable: r}, nil
}

func parseCIDR(s string) (Entry, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return Entry{}, fmt.Errorf("%q is not a valid CIDR: %w", s, err)
	}
	if err := checkPoolAddr(p.Addr(), s); err != nil {
		return Entry{}, err
	}
	if p.Masked() != p {
		return Entry{}, fmt.Errorf("%q has host bits set; did you mean %s?", s, p.Masked())
	}
	r := Range{First: p.Addr(), Last: lastAddr(p)}
	e := Entry{Extent: r, Usable: r}
	if p.Addr().Is4() && p.Bits() <= 30 {
		e.Usable = Range{First: r.First.Next(), Last: r.Last.Prev()}
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
