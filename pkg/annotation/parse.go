package annotation

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation/values"
)

// MaxAllowSharedIPLength is the longest key ParseAllowSharedIP accepts.
const MaxAllowSharedIPLength = values.MaxAllowSharedIPLength

// ParseLoadBalancerIPs parses the value of the LoadBalancerIPs annotation: a
// comma-separated list of IP addresses, at most one IPv4 and one IPv6
// address. White space around each entry is ignored. An empty value (or one
// of white space only) is an error, as are empty entries, addresses with a
// zone, IPv4-mapped IPv6 addresses, the unspecified, loopback, multicast and
// link-local addresses, and two addresses of the same family. The addresses
// come back in the order written. It is values.ParseLoadBalancerIPs.
func ParseLoadBalancerIPs(value string) ([]netip.Addr, error) {
	return values.ParseLoadBalancerIPs(value)
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
// (case-sensitive). It is values.ParseAllowSharedIP.
func ParseAllowSharedIP(value string) (string, error) {
	return values.ParseAllowSharedIP(value)
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
