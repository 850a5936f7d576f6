package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/klog/v2"
)

// The descriptions of the rules the upstream provider (cloud-provider-aws
// v1.37.1: NLBClientRuleDescription, NLBHealthCheckRuleDescription,
// NLBMtuDiscoveryRuleDescription) adds to the cluster's instance security
// groups for an NLB without security groups. Client and health rules are
// one NLB's: "=<the NLB's name>" follows. The MTU rule (ICMP
// fragmentation-needed) is the group's, one per client CIDR of any NLB's
// client rule, with the bare description.
const (
	upstreamClientRule = "kubernetes.io/rule/nlb/client"
	upstreamHealthRule = "kubernetes.io/rule/nlb/health"
	upstreamMTURule    = "kubernetes.io/rule/nlb/mtu"
)

// upstreamRules returns the rules of sg to revoke when the NLB named lb
// goes: its client and health rules, and the MTU rules of CIDRs no other
// NLB's client rule keeps (as upstream converges them). Without a client
// or health rule of lb in sg (a Service the upstream provider never
// served there, which is most of them) nothing is revoked: the group's MTU
// rules are not the Service's to remove.
func upstreamRules(sg ec2types.SecurityGroup, lb string) []ec2types.IpPermission {
	own := []string{upstreamClientRule + "=" + lb, upstreamHealthRule + "=" + lb}
	if !hasRuleDescribed(sg, own) {
		return nil
	}
	kept := map[string]bool{}
	for _, p := range sg.IpPermissions {
		for _, r := range p.IpRanges {
			if d := awssdk.ToString(r.Description); strings.HasPrefix(d, upstreamClientRule+"=") && d != own[0] {
				kept[awssdk.ToString(r.CidrIp)] = true
			}
		}
		for _, r := range p.Ipv6Ranges {
			if d := awssdk.ToString(r.Description); strings.HasPrefix(d, upstreamClientRule+"=") && d != own[0] {
				kept[awssdk.ToString(r.CidrIpv6)] = true
			}
		}
	}
	revoke := func(desc, cidr string) bool {
		return slices.Contains(own, desc) || (strings.HasPrefix(desc, upstreamMTURule) && !kept[cidr])
	}
	var out []ec2types.IpPermission
	for _, p := range sg.IpPermissions {
		q := ec2types.IpPermission{IpProtocol: p.IpProtocol, FromPort: p.FromPort, ToPort: p.ToPort}
		for _, r := range p.IpRanges {
			if revoke(awssdk.ToString(r.Description), awssdk.ToString(r.CidrIp)) {
				q.IpRanges = append(q.IpRanges, ec2types.IpRange{CidrIp: r.CidrIp})
			}
		}
		for _, r := range p.Ipv6Ranges {
			if revoke(awssdk.ToString(r.Description), awssdk.ToString(r.CidrIpv6)) {
				q.Ipv6Ranges = append(q.Ipv6Ranges, ec2types.Ipv6Range{CidrIpv6: r.CidrIpv6})
			}
		}
		if len(q.IpRanges)+len(q.Ipv6Ranges) > 0 {
			out = append(out, q)
		}
	}
	return out
}

// revokeUpstreamRules removes, from the cluster's security groups (sgs),
// every rule the upstream provider added for the Service's NLB (its name
// is the Service's alone), so none is left once the Service is gone.
func (l *LoadBalancer) revokeUpstreamRules(ctx context.Context, sgs []ec2types.SecurityGroup, n names) error {
	for _, sg := range sgs {
		perms := upstreamRules(sg, n.upstream)
		if len(perms) == 0 {
			continue
		}
		id := awssdk.ToString(sg.GroupId)
		if _, err := l.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: perms}); err != nil && !isNotFound(err) {
			return fmt.Errorf("RevokeSecurityGroupIngress %s (the upstream provider's rules for %s): %w", id, n.upstream, err)
		}
		klog.FromContext(ctx).V(2).Info("Revoked the upstream provider's instance rules", "securityGroup", id, "loadBalancer", n.upstream, "rules", len(perms))
		reportChange(ctx, "the upstream provider's rules for %s revoked in security group %s", n.upstream, id)
	}
	return nil
}

// hasRuleDescribed reports whether a rule of sg carries one of descs.
func hasRuleDescribed(sg ec2types.SecurityGroup, descs []string) bool {
	for _, p := range sg.IpPermissions {
		for _, r := range p.IpRanges {
			if slices.Contains(descs, awssdk.ToString(r.Description)) {
				return true
			}
		}
		for _, r := range p.Ipv6Ranges {
			if slices.Contains(descs, awssdk.ToString(r.Description)) {
				return true
			}
		}
	}
	return false
}
