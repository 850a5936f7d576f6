package vsphere

import (
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// nodeAddresses chooses a VM's node addresses by the rules: per IP family,
// one InternalIP and one ExternalIP, then the guest's DNS name as Hostname.
func nodeAddresses(a *AddressRules, vm *vmInfo) []corev1.NodeAddress {
	usable := usableIPs(a, vm.IPs)
	var internal, external []corev1.NodeAddress
	for _, family := range a.IPFamilies {
		in, ex := pick(a, usable, family)
		if in != "" {
			internal = append(internal, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: in})
		}
		if ex != "" {
			external = append(external, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ex})
		}
	}
	out := append(internal, external...)
	if len(out) > 0 && vm.HostName != "" {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: vm.HostName})
	}
	return out
}

// usableIP is a guest address that may become a node address.
type usableIP struct {
	ip      net.IP
	network string
}

// usableIPs drops addresses that are malformed, loopback, link-local,
// unspecified, multicast or excluded.
func usableIPs(a *AddressRules, ips []guestIP) []usableIP {
	var out []usableIP
	for _, g := range ips {
		ip := net.ParseIP(g.IP)
		if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
			continue
		}
		if a.Excluded(ip) {
			continue
		}
		out = append(out, usableIP{ip: ip, network: g.Network})
	}
	return out
}

// pick returns the internal and external address of one family.
func pick(a *AddressRules, ips []usableIP, family string) (internal, external string) {
	var ofFamily []usableIP
	for _, u := range ips {
		if (u.ip.To4() != nil) == (family == FamilyIPv4) {
			ofFamily = append(ofFamily, u)
		}
	}
	internalRules := a.HasInternalSubnets() || len(a.InternalNetworks) > 0
	externalRules := a.HasExternalSubnets() || len(a.ExternalNetworks) > 0
	for _, u := range ofFamily {
		isIn := a.InInternalSubnets(u.ip) || slices.Contains(a.InternalNetworks, u.network)
		isEx := a.InExternalSubnets(u.ip) || slices.Contains(a.ExternalNetworks, u.network)
		if internal == "" && (isIn || (!internalRules && !isEx)) {
			internal = u.ip.String()
		}
		if external == "" && isEx {
			external = u.ip.String()
		}
	}
	if internal == "" && !internalRules && len(ofFamily) > 0 {
		internal = ofFamily[0].ip.String()
	}
	if !externalRules {
		external = internal
	}
	return internal, external
}
