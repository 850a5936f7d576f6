package aws

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// subnetMapping is the address a subnet of the NLB gets: an Elastic IP
// allocation or a private IPv4 address.
type subnetMapping struct {
	eip, privateIP string
}

// eipAllocationID is the format of Elastic IP allocation IDs.
var eipAllocationID = annotation.IDFormat{
	Pattern: regexp.MustCompile(`^eipalloc-([0-9a-f]{8}|[0-9a-f]{17})$`),
	Example: "eipalloc-0123456789abcdef0",
	Hint:    "`aws ec2 describe-addresses`",
}

// readAddresses reads the address annotations into d.
func readAddresses(r *reader, d *desiredLB) {
	r.IDs(AnnotationEIPAllocations, eipAllocationID, &d.eips)
	var ips []string
	if r.List(AnnotationPrivateIPv4Addresses, &ips) {
		for _, ip := range ips {
			if p := net.ParseIP(ip); p == nil || p.To4() == nil {
				r.Invalid(AnnotationPrivateIPv4Addresses, r.raw(AnnotationPrivateIPv4Addresses), fmt.Sprintf("%q is not an IPv4 address", ip))
				ips = nil
				break
			}
		}
		d.privateIPs = ips
	}
	d.ipType = "ipv4"
	r.Enum(AnnotationIPAddressType, &d.ipType, "ipv4", "dualstack")
	switch {
	case len(d.eips) > 0 && d.scheme == schemeInternal:
		r.Invalid(AnnotationEIPAllocations, r.raw(AnnotationEIPAllocations), "Elastic IPs are for internet-facing load balancers; remove it or make the load balancer internet-facing")
	case len(d.privateIPs) > 0 && d.scheme != schemeInternal:
		r.Invalid(AnnotationPrivateIPv4Addresses, r.raw(AnnotationPrivateIPv4Addresses), "private addresses are for internal load balancers; remove it or set aws-load-balancer-internal: \"true\"")
	}
}

// mapAddresses assigns the Service's addresses to the NLB's subnets: Elastic
// IPs in the subnets' ID order, private addresses to the subnet holding
// each. Either must give exactly one address per subnet.
func (l *LoadBalancer) mapAddresses(ctx context.Context, d *desiredLB) (map[string]subnetMapping, error) {
	if len(d.eips) == 0 && len(d.privateIPs) == 0 {
		return nil, nil
	}
	out := map[string]subnetMapping{}
	if len(d.eips) > 0 {
		if len(d.eips) != len(d.subnets) {
			return nil, annotationError(AnnotationEIPAllocations, strings.Join(d.eips, ","), fmt.Sprintf("give one allocation per subnet of the load balancer (%d: %s)", len(d.subnets), strings.Join(d.subnets, ",")))
		}
		for i, id := range d.subnets {
			out[id] = subnetMapping{eip: d.eips[i]}
		}
		return out, nil
	}
	all, err := l.vpcSubnets(ctx)
	if err != nil {
		return nil, err
	}
	for _, ip := range d.privateIPs {
		id := subnetHolding(all, d.subnets, net.ParseIP(ip))
		if id == "" || out[id].privateIP != "" {
			return nil, annotationError(AnnotationPrivateIPv4Addresses, strings.Join(d.privateIPs, ","), fmt.Sprintf("give one address in each subnet of the load balancer (%s); %s is not in one of them or shares one", strings.Join(d.subnets, ","), ip))
		}
		out[id] = subnetMapping{privateIP: ip}
	}
	if len(out) != len(d.subnets) {
		return nil, annotationError(AnnotationPrivateIPv4Addresses, strings.Join(d.privateIPs, ","), fmt.Sprintf("give one address in each subnet of the load balancer (%s)", strings.Join(d.subnets, ",")))
	}
	return out, nil
}

func subnetHolding(all []subnet, ids []string, ip net.IP) string {
	for _, sn := range all {
		if sn.cidr != nil && sn.cidr.Contains(ip) && slices.Contains(ids, sn.id) {
			return sn.id
		}
	}
	return ""
}

// subnetMappings are CreateLoadBalancer's SubnetMappings for d (nil without
// addresses: Subnets are sent instead).
func subnetMappings(d *desiredLB) []elbtypes.SubnetMapping {
	if d.mappings == nil {
		return nil
	}
	out := make([]elbtypes.SubnetMapping, 0, len(d.subnets))
	for _, id := range d.subnets {
		m := elbtypes.SubnetMapping{SubnetId: awssdk.String(id)}
		if a := d.mappings[id]; a.eip != "" {
			m.AllocationId = awssdk.String(a.eip)
		} else if a.privateIP != "" {
			m.PrivateIPv4Address = awssdk.String(a.privateIP)
		}
		out = append(out, m)
	}
	return out
}

// syncIPType changes a running NLB's IP address type in place.
func (l *LoadBalancer) syncIPType(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer) error {
	have := string(lb.IpAddressType)
	if have == "" {
		have = "ipv4"
	}
	if have == d.ipType {
		return nil
	}
	if _, err := l.elb.SetIpAddressType(ctx, &elbv2.SetIpAddressTypeInput{LoadBalancerArn: lb.LoadBalancerArn, IpAddressType: elbtypes.IpAddressType(d.ipType)}); err != nil {
		if code := errorCode(err); code == "InvalidConfigurationRequest" || code == "ValidationError" {
			return annotationError(AnnotationIPAddressType, d.ipType, fmt.Sprintf("AWS refused it (%v); dual-stack needs IPv6 CIDRs on every subnet of the load balancer", err))
		}
		return fmt.Errorf("SetIpAddressType: %w", err)
	}
	lb.IpAddressType = elbtypes.IpAddressType(d.ipType)
	klog.FromContext(ctx).V(2).Info("Changed load balancer IP address type", "ipAddressType", d.ipType)
	reportChange(ctx, "load-balancer IP address type set to %s", d.ipType)
	return nil
}

// addressesKept describes the addresses the Service asks for that the
// running NLB lacks ("" when it has them all, or the Service asks for
// none).
func addressesKept(d *desiredLB, lb *elbtypes.LoadBalancer) string {
	if d.mappings == nil {
		return ""
	}
	var diffs []string
	for _, az := range lb.AvailabilityZones {
		want, id := d.mappings[awssdk.ToString(az.SubnetId)], awssdk.ToString(az.SubnetId)
		var have subnetMapping
		if len(az.LoadBalancerAddresses) > 0 {
			have = subnetMapping{eip: awssdk.ToString(az.LoadBalancerAddresses[0].AllocationId), privateIP: awssdk.ToString(az.LoadBalancerAddresses[0].PrivateIPv4Address)}
		}
		if want != have {
			diffs = append(diffs, fmt.Sprintf("%s has %s, not %s", id, describeMapping(have), describeMapping(want)))
		}
	}
	return strings.Join(diffs, "; ")
}

func describeMapping(m subnetMapping) string {
	switch {
	case m.eip != "":
		return m.eip
	case m.privateIP != "":
		return m.privateIP
	}
	return "AWS's address"
}

// addressesKeptError is the warning for addresses a running NLB cannot
// take: it keeps its own, as the upstream provider does.
func addressesKeptError(lb *elbtypes.LoadBalancer, diffs string) error {
	return backends.NewUserError(reasonAddressesKept, fmt.Errorf("load balancer %s keeps its addresses (%s): AWS cannot change the addresses of a running load balancer, so %s and %s apply only to a new one. "+
		"To get them, delete and re-create the Service (a new load balancer and DNS name); to silence this, set the annotations to the addresses it has or remove them",
		awssdk.ToString(lb.LoadBalancerName), diffs, AnnotationEIPAllocations, AnnotationPrivateIPv4Addresses))
}
