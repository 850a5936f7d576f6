package annotation

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"
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

// ParseKubeVIPIPs parses a kube-vip.io/loadbalancerIPs value (name) as the
// bare-metal backend with announce: kube-vip reads one the user wrote: a
// request of pool addresses, read as kube-vip reads it (entries separated
// by commas, white space around each ignored). kube-vip reads an entry that
// is no IP address as a hostname to resolve, and 0.0.0.0 or :: as "get an
// address by DHCP"; neither is an address of the pools, so both are
// refused, as are an empty value or entry, a zone, an IPv4-mapped IPv6
// address, loopback, multicast and link-local addresses, and two addresses
// of one family. The bare-metal backend reads its requests with it, and
// pkg/admission/crosscheck holds the policy to the backend's answers.
func ParseKubeVIPIPs(name Name, value string) ([]netip.Addr, error) {
	if strings.TrimSpace(value) == "" {
		return nil, errKubeVIP(name, value, "the value is empty (kube-vip then announces nothing)")
	}
	var out []netip.Addr
	for i, f := range strings.Split(value, ",") {
		ip, err := parseKubeVIPIP(strings.TrimSpace(f))
		if err != nil {
			return nil, errKubeVIP(name, value, fmt.Sprintf("entry %d: %v", i+1, err))
		}
		for _, prev := range out {
			if prev.Is4() == ip.Is4() {
				return nil, errKubeVIP(name, value, fmt.Sprintf("%s and %s are both %s; the backend gives one address per IP family", prev, ip, familyName(ip)))
			}
		}
		out = append(out, ip)
	}
	return out, nil
}

// parseKubeVIPIP parses one entry of a kube-vip.io/loadbalancerIPs request.
func parseKubeVIPIP(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, fmt.Errorf("empty entry; separate addresses with a single comma")
	}
	ip, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, fmt.Errorf("%q is not an IP address (kube-vip would resolve it as a hostname)", s)
	case ip.IsUnspecified():
		return netip.Addr{}, fmt.Errorf("%s asks kube-vip for an address by DHCP, which the backend does not serve", ip)
	case ip.Zone() != "" || ip.Is4In6():
		return netip.Addr{}, fmt.Errorf("%q is not a plain IP address; write %s", s, ip.Unmap().WithZone(""))
	case ip.IsLoopback(), ip.IsMulticast(), ip.IsLinkLocalUnicast(), ip.IsInterfaceLocalMulticast():
		return netip.Addr{}, fmt.Errorf("%s cannot be a load-balancer address (loopback, multicast or link-local)", ip)
	}
	return ip, nil
}

// errKubeVIP is the error for a kube-vip.io/loadbalancerIPs request the
// bare-metal backend cannot serve, with the fix.
func errKubeVIP(name Name, value, why string) error {
	return fmt.Errorf("annotation %s=%q: %s; under announce: kube-vip the backend serves it as a request of pool addresses: write one address per IP family of the Service, e.g. 192.0.2.10 or 192.0.2.10,2001:db8::10, or remove the annotation to have one assigned", name, value, why)
}
