// Package values parses the values of the shared Service annotations that
// several packages read (the backends, admission's checks, the annotation
// reader): LoadBalancerIPs and AllowSharedIP. Package annotation calls it.
//
// It imports the standard library only, so that its fuzz targets build
// quickly: hack/fuzz.sh compiles every dependency of a fuzz target's test
// binary with the fuzzer's instrumentation, and package annotation's test
// binary depends on client-go and every backend's SDK.
package values

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The annotation names the errors quote, exactly as annotation.LoadBalancerIPs
// and annotation.AllowSharedIP (the docs are generated from those; a test in
// package annotation keeps the two equal).
const (
	// LoadBalancerIPs is the name of the annotation ParseLoadBalancerIPs
	// reads.
	LoadBalancerIPs = "multicloud-ccm.io/load-balancer-ips"
	// AllowSharedIP is the name of the annotation ParseAllowSharedIP reads.
	AllowSharedIP = "multicloud-ccm.io/allow-shared-ip"
)

// MaxAllowSharedIPLength is the longest key ParseAllowSharedIP accepts.
const MaxAllowSharedIPLength = 253

// ParseLoadBalancerIPs parses the value of the LoadBalancerIPs annotation: a
// comma-separated list of IP addresses, at most one IPv4 and one IPv6
// address. White space around each entry is ignored. An empty value (or one
// of white space only) is an error, as are empty entries, addresses with a
// zone, IPv4-mapped IPv6 addresses, the unspecified, loopback, multicast and
// link-local addresses, and two addresses of the same family. The addresses
// come back in the order written.
func ParseLoadBalancerIPs(value string) ([]netip.Addr, error) {
	if strings.TrimSpace(value) == "" {
		return nil, fmt.Errorf("annotation %s is empty: write one address per IP family, e.g. 192.0.2.10 or 192.0.2.10,2001:db8::10, or remove the annotation", LoadBalancerIPs)
	}
	parts := strings.Split(value, ",")
	out := make([]netip.Addr, 0, len(parts))
	for i, p := range parts {
		ip, err := parseLoadBalancerIP(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("annotation %s=%q, entry %d: %w", LoadBalancerIPs, value, i+1, err)
		}
		for _, prev := range out {
			if prev.Is4() == ip.Is4() {
				return nil, fmt.Errorf("annotation %s=%q: %s and %s are both %s; give at most one address per IP family", LoadBalancerIPs, value, prev, ip, familyName(ip))
			}
		}
		out = append(out, ip)
	}
	return out, nil
}

// parseLoadBalancerIP parses one entry of the LoadBalancerIPs annotation.
func parseLoadBalancerIP(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, fmt.Errorf("empty entry: separate addresses with a single comma")
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	switch {
	case ip.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%q has a zone; write the address without %%zone", s)
	case ip.Is4In6():
		return netip.Addr{}, fmt.Errorf("%q is an IPv4-mapped IPv6 address; write it as %s", s, ip.Unmap())
	case ip.IsUnspecified(), ip.IsLoopback(), ip.IsMulticast(), ip.IsLinkLocalUnicast(), ip.IsInterfaceLocalMulticast():
		return netip.Addr{}, fmt.Errorf("%s cannot be a load-balancer address (unspecified, loopback, multicast or link-local)", ip)
	}
	return ip, nil
}

func familyName(ip netip.Addr) string {
	if ip.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// ParseAllowSharedIP parses the value of the AllowSharedIP annotation: a
// sharing key of 1 to MaxAllowSharedIPLength printable characters without
// white space. Surrounding white space is ignored. Keys compare exactly
// (case-sensitive).
func ParseAllowSharedIP(value string) (string, error) {
	key := strings.TrimSpace(value)
	switch {
	case key == "":
		return "", fmt.Errorf("annotation %s is empty: set it to a key shared by the Services that may share an address, e.g. web, or remove it", AllowSharedIP)
	case len(key) > MaxAllowSharedIPLength:
		return "", fmt.Errorf("annotation %s is %d bytes long; use a key of at most %d", AllowSharedIP, len(key), MaxAllowSharedIPLength)
	case !utf8.ValidString(key):
		return "", fmt.Errorf("annotation %s=%q is not valid UTF-8", AllowSharedIP, key)
	}
	if strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return "", fmt.Errorf("annotation %s=%q contains white space or a non-printable character; use letters, digits and punctuation only", AllowSharedIP, key)
	}
	return key, nil
}
