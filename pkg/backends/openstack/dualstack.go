package openstack

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// Reasons of the Warning events about a Service's IP families.
const (
	// reasonSingleStack: a dual-stack Service is served on one family
	// only (no subnet of the other family on the VIP network, or a load
	// balancer made single-stack, to which Octavia cannot add a VIP).
	reasonSingleStack = "LoadBalancerSingleStack"
	// reasonExtraVIP: a single-stack Service's load balancer keeps the
	// other family's VIP, which Octavia cannot remove.
	reasonExtraVIP = "LoadBalancerExtraVIP"
)

// isDualStack reports whether the Service asks for both IP families.
func isDualStack(svc *corev1.Service) bool { return len(svc.Spec.IPFamilies) == 2 }

// familyOf is the IP family of an address; "" for no address.
func familyOf(addr string) corev1.IPFamily {
	ip := net.ParseIP(addr)
	switch {
	case ip == nil:
		return ""
	case ip.To4() != nil:
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// ipVersion is Neutron's ip_version of a family.
func ipVersion(f corev1.IPFamily) int {
	if f == corev1.IPv6Protocol {
		return 6
	}
	return 4
}

// nodeAddressOf is the node's first InternalIP of the family.
func nodeAddressOf(n *corev1.Node, f corev1.IPFamily) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && familyOf(a.Address) == f {
			return a.Address
		}
	}
	return ""
}

// memberAddress is the address a node is a member at: its first
// InternalIP, or for a dual-stack Service its first of the Service's
// primary family (Octavia forwards both VIP families to the same pool).
func memberAddress(svc *corev1.Service, n *corev1.Node) string {
	if isDualStack(svc) {
		return nodeAddressOf(n, svc.Spec.IPFamilies[0])
	}
	return nodeAddress(n)
}

// requestedIPOf is the requested address of a family: the first of
// multicloud-ccm.io/load-balancer-ips of that family, else
// spec.loadBalancerIP when it is of that family.
func requestedIPOf(svc *corev1.Service, f corev1.IPFamily) string {
	for _, a := range strings.Split(svc.Annotations[string(annotation.LoadBalancerIPs)], ",") {
		if a = strings.TrimSpace(a); familyOf(a) == f {
			return a
		}
	}
	if familyOf(svc.Spec.LoadBalancerIP) == f {
		return svc.Spec.LoadBalancerIP
	}
	return ""
}

// vipAddresses are the load balancer's VIP addresses, primary first.
func vipAddresses(lb *loadbalancers.LoadBalancer) []string {
	out := []string{lb.VipAddress}
	for _, v := range lb.AdditionalVips {
		if v.IPAddress != "" {
			out = append(out, v.IPAddress)
		}
	}
	return out
}

// serviceAddresses are the addresses of the Service's status: addr (its
// floating IP, else its VIP) for a single-stack Service; for a dual-stack
// one, one address per family in spec.ipFamilies order: addr for its own
// family (an IPv4 floating IP replaces the IPv4 VIP), the load balancer's
// VIP of the other. None while addr is unknown.
func serviceAddresses(svc *corev1.Service, lb *loadbalancers.LoadBalancer, addr string) []string {
	if addr == "" {
		return nil
	}
	if !isDualStack(svc) {
		return []string{addr}
	}
	var out []string
	for _, f := range svc.Spec.IPFamilies {
		if familyOf(addr) == f {
			out = append(out, addr)
			continue
		}
		for _, v := range vipAddresses(lb) {
			if familyOf(v) == f {
				out = append(out, v)
				break
			}
		}
	}
	if len(out) == 0 {
		return []string{addr}
	}
	return out
}

// subnetCacheTTL is how long a Neutron subnet listing is reused.
const subnetCacheTTL = time.Minute

// subnetCache keeps Neutron subnet listings for a while: choosing a
// dual-stack VIP reads them once per creation, retries included.
type subnetCache struct {
	mu      sync.Mutex
	entries map[string]subnetEntry
}

type subnetEntry struct {
	subnets []subnets.Subnet
	at      time.Time
}

// list lists the subnets matching opts, from the cache when it has them.
func (c *subnetCache) list(ctx context.Context, nc *gophercloud.ServiceClient, opts subnets.ListOpts) ([]subnets.Subnet, error) {
	key := fmt.Sprintf("%s|%s|%d", opts.ID, opts.NetworkID, opts.IPVersion)
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && time.Since(e.at) < subnetCacheTTL {
		return e.subnets, nil
	}
	pages, err := subnets.List(nc, opts).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing subnets: %w", err)
	}
	found, err := subnets.ExtractSubnets(pages)
	if err != nil {
		return nil, fmt.Errorf("listing subnets: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]subnetEntry{}
	}
	c.entries[key] = subnetEntry{subnets: found, at: time.Now()}
	return found, nil
}

// dualStackSubnets picks the VIP subnets of a dual-stack Service's new
// load balancer: primary, of the family spec.ipFamilies[0], and second, of
// the other family, on the same network: the VIP network the settings
// give (the configured subnet's network, or vipNetworkID), the configured
// subnet serving its own family, Neutron's first subnet of the network
// the other. why says, when it is set, why the load balancer gets one
// family only.
func (l *LoadBalancer) dualStackSubnets(ctx context.Context, sc *serviceClients, svc *corev1.Service, o *lbOptions) (primary, second, why string, err error) {
	switch {
	case o.portID != "":
		return "", "", fmt.Sprintf("the VIP is the port %s of annotation %s", o.portID, AnnotationPortID), nil
	case sc.network == nil:
		return "", "", "the other family's subnet cannot be looked up without Neutron (add it to the Keystone catalog or set endpoints.network)", nil
	}
	network, configured := o.vipNetworkID, (*subnets.Subnet)(nil)
	if o.vipSubnetID != "" {
		found, err := l.subnets.list(ctx, sc.network, subnets.ListOpts{ID: o.vipSubnetID})
		if err != nil {
			return "", "", "", err
		}
		if len(found) == 0 {
			return "", "", fmt.Sprintf("the VIP subnet %s is not in Neutron", o.vipSubnetID), nil
		}
		configured, network = &found[0], found[0].NetworkID
	}
	if network == "" {
		return "", "", "no VIP subnet or network is set", nil
	}
	all, err := l.subnets.list(ctx, sc.network, subnets.ListOpts{NetworkID: network})
	if err != nil {
		return "", "", "", err
	}
	pick := func(f corev1.IPFamily) string {
		if configured != nil && configured.IPVersion == ipVersion(f) {
			return configured.ID
		}
		for _, s := range all {
			if s.IPVersion == ipVersion(f) {
				return s.ID
			}
		}
		return ""
	}
	fams := svc.Spec.IPFamilies
	primary, second = pick(fams[0]), pick(fams[1])
	for _, f := range fams {
		if pick(f) == "" {
			return "", "", fmt.Sprintf("the VIP network %s has no %s subnet", network, f), nil
		}
	}
	return primary, second, "", nil
}

// dualStackCreate sets the VIPs of a dual-stack Service's new load
// balancer: the primary family's subnet, the other family's as additional
// VIP (with the requested addresses of an internal load balancer). When
// the Service can only get one family, it says so with a Warning event and
// leaves opts as they are.
func (l *LoadBalancer) dualStackCreate(ctx context.Context, sc *serviceClients, svc *corev1.Service, o *lbOptions, opts *loadbalancers.CreateOpts) error {
	primary, second, why, err := l.dualStackSubnets(ctx, sc, svc, o)
	if err != nil {
		return err
	}
	fams := svc.Spec.IPFamilies
	if why != "" {
		l.events.warnOnce(ctx, svc, familiesKey(svc), reasonSingleStack,
			"The Service asks for %s and %s, but %s: its load balancer gets a VIP of one family only, and the Service is served single-stack. To serve both families, give the VIP network a subnet of each family, then delete and re-create the Service",
			fams[0], fams[1], why)
		return nil
	}
	opts.VipSubnetID, opts.VipNetworkID = primary, ""
	add := loadbalancers.AdditionalVip{SubnetID: second}
	if o.internal {
		opts.VipAddress, add.IPAddress = requestedIPOf(svc, fams[0]), requestedIPOf(svc, fams[1])
	}
	opts.AdditionalVips = []loadbalancers.AdditionalVip{add}
	return nil
}

// familiesKey keys the Service's IP-family events. The UID is part of it:
// a Service deleted and re-created under its name with the same problem
// is told again.
func familiesKey(svc *corev1.Service) string {
	return svc.Namespace + "/" + svc.Name + "/" + string(svc.UID) + "/families"
}

// checkFamilies tells, once, with a Warning event, that the Service's
// load balancer does not serve the IP families it asks for and cannot be
// changed to: Octavia neither adds nor removes a live load balancer's
// VIPs, and replacing the load balancer would change the Service's
// addresses without the operator's say, so it keeps serving as it is.
func (l *LoadBalancer) checkFamilies(ctx context.Context, svc *corev1.Service, lb *loadbalancers.LoadBalancer) {
	key := familiesKey(svc)
	switch dual, has := isDualStack(svc), len(lb.AdditionalVips) > 0; {
	case dual && !has:
		l.events.warnOnce(ctx, svc, key, reasonSingleStack,
			"The Service asks for %s and %s, but its load balancer %s has one VIP (%s) and Octavia cannot add one to a live load balancer: the Service is served single-stack. To serve both families, make sure the VIP network has a subnet of each family, then delete and re-create the Service (its addresses change)",
			svc.Spec.IPFamilies[0], svc.Spec.IPFamilies[1], lb.ID, lb.VipAddress)
	case !dual && has:
		l.events.warnOnce(ctx, svc, key, reasonExtraVIP,
			"The Service is single-stack, but its load balancer %s keeps its additional VIP %s, which Octavia cannot remove from a live load balancer: the status lists the primary VIP only. To drop it, delete and re-create the Service (its addresses change)",
			lb.ID, describeAdditional(lb))
	default:
		l.events.forget(key)
	}
}

// describeAdditional names a load balancer's additional VIPs: their
// address, or their subnet when Octavia reports no address.
func describeAdditional(lb *loadbalancers.LoadBalancer) string {
	var out []string
	for _, v := range lb.AdditionalVips {
		if v.IPAddress != "" {
			out = append(out, v.IPAddress)
		} else {
			out = append(out, "on subnet "+v.SubnetID)
		}
	}
	return strings.Join(out, ", ")
}
