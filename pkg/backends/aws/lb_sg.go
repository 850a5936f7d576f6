package aws

import (
	"context"
	"fmt"
	"sort"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// rule is one ingress rule: IP protocol (tcp, udp, icmp, -1), port range
// (port to to; -1 for protocols without ports) and source: an IPv4 or
// IPv6 CIDR, a security group ID (sg-…) or a managed prefix list ID (pl-…).
// The backend's own rules are one port each, from a CIDR.
type rule struct {
	protocol string
	port, to int32
	source   string
}

// findSG returns the Service's security group, or nil.
func (l *LoadBalancer) findSG(ctx context.Context, n names) (*ec2types.SecurityGroup, error) {
	groups, err := l.sgsNamed(ctx, n.sg)
	if err != nil {
		return nil, err
	}
	for i := range groups {
		sg := &groups[i]
		if ec2Tag(sg.Tags, tagClusterPrefix+l.clusterID) != "" && ec2Tag(sg.Tags, tagService) == n.service {
			return sg, nil
		}
	}
	return nil, nil
}

// sgsNamed returns the VPC's security groups called name: from a repair
// pass's snapshot if the reconcile has one, else from AWS.
func (l *LoadBalancer) sgsNamed(ctx context.Context, name string) ([]ec2types.SecurityGroup, error) {
	if v := l.viewOf(ctx); v != nil {
		return v.sgs, nil
	}
	out, err := l.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
		{Name: awssdk.String("vpc-id"), Values: []string{l.settings.VPC}},
		{Name: awssdk.String("group-name"), Values: []string{name}},
	}})
	if err != nil {
		return nil, fmt.Errorf("DescribeSecurityGroups: %w", err)
	}
	return out.SecurityGroups, nil
}

func ec2Tag(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if awssdk.ToString(t.Key) == key {
			return awssdk.ToString(t.Value)
		}
	}
	return ""
}

// ensureSG returns the ID of the Service's security group, creating it and
// bringing its ingress rules in line with the ports and source ranges.
func (l *LoadBalancer) ensureSG(ctx context.Context, d *desiredLB) (string, error) {
	sg, err := l.findSG(ctx, d.names)
	if err != nil {
		return "", err
	}
	var id string
	have := map[rule]bool{}
	if sg == nil {
		if id, err = l.createSG(ctx, d); err != nil {
			return "", err
		}
	} else {
		id, have = awssdk.ToString(sg.GroupId), sgRules(sg)
	}
	want := desiredRules(d)
	var add, remove []rule
	for r := range want {
		if !have[r] {
			add = append(add, r)
		}
	}
	for r := range have {
		if !want[r] {
			remove = append(remove, r)
		}
	}
	return id, l.changeRules(ctx, id, add, remove)
}

func (l *LoadBalancer) createSG(ctx context.Context, d *desiredLB) (string, error) {
	var tags []ec2types.Tag
	for _, k := range sorted(keys(d.tags)) {
		tags = append(tags, ec2types.Tag{Key: awssdk.String(k), Value: awssdk.String(d.tags[k])})
	}
	out, err := l.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName:         awssdk.String(d.names.sg),
		Description:       awssdk.String("Load balancer of Service " + d.names.service + " in cluster " + l.clusterID),
		VpcId:             awssdk.String(l.settings.VPC),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: tags}},
	})
	if err != nil {
		return "", fmt.Errorf("CreateSecurityGroup: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Created security group", "securityGroup", awssdk.ToString(out.GroupId))
	reportChange(ctx, "security group %s (%s) created", d.names.sg, awssdk.ToString(out.GroupId))
	return awssdk.ToString(out.GroupId), nil
}

// sgRules reads every ingress rule of a group the backend owns: any
// protocol, any port range (a rule widened to 80-81 is not the rule for
// port 80), and every kind of source (CIDRs of either family, security
// groups, prefix lists), so that whatever is not wanted is revoked.
func sgRules(sg *ec2types.SecurityGroup) map[rule]bool {
	out := map[rule]bool{}
	for _, p := range sg.IpPermissions {
		from, to := int32(-1), int32(-1)
		if p.FromPort != nil {
			from = *p.FromPort
		}
		if p.ToPort != nil {
			to = *p.ToPort
		}
		r := rule{protocol: awssdk.ToString(p.IpProtocol), port: from, to: to}
		for _, x := range p.IpRanges {
			r.source = awssdk.ToString(x.CidrIp)
			out[r] = true
		}
		for _, x := range p.Ipv6Ranges {
			r.source = awssdk.ToString(x.CidrIpv6)
			out[r] = true
		}
		for _, x := range p.UserIdGroupPairs {
			r.source = awssdk.ToString(x.GroupId)
			out[r] = true
		}
		for _, x := range p.PrefixListIds {
			r.source = awssdk.ToString(x.PrefixListId)
			out[r] = true
		}
	}
	return out
}

// desiredRules are the ingress rules of the backend's security group: the
// listener ports from the source ranges, none when it is only the backend
// security group beside the Service's own.
func desiredRules(d *desiredLB) map[rule]bool {
	out := map[rule]bool{}
	if len(d.byoSGs) > 0 {
		return out
	}
	for _, p := range d.ports {
		for _, proto := range ipProtocols(p.listener) {
			for _, cidr := range d.sourceRanges {
				out[rule{protocol: proto, port: p.port, to: p.port, source: cidr}] = true
			}
		}
	}
	return out
}

// changeRules revokes and then authorizes rules of the Service's own group
// id: the rules revoked are no longer wanted, and a group at AWS's
// rules-per-group quota takes new source ranges only once the old ones'
// rules are gone.
func (l *LoadBalancer) changeRules(ctx context.Context, id string, add, remove []rule) error {
	if len(remove) > 0 {
		if _, err := l.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: awssdk.String(id), IpPermissions: permissions(remove)}); err != nil && !isNotFound(err) {
			return fmt.Errorf("RevokeSecurityGroupIngress: %w", err)
		}
		klog.FromContext(ctx).V(2).Info("Revoked ingress", "securityGroup", id, "rules", len(remove))
		reportChange(ctx, "%s revoked in security group %s", plural("security-group rule", ruleNames(remove)), id)
	}
	if len(add) > 0 {
		if _, err := l.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: awssdk.String(id), IpPermissions: permissions(add)}); err != nil {
			if errorCode(err) == codeRulesPerGroup {
				return ownGroupFull(id, err)
			}
			return fmt.Errorf("AuthorizeSecurityGroupIngress: %w", err)
		}
		klog.FromContext(ctx).V(2).Info("Allowed ingress", "securityGroup", id, "rules", len(add))
		reportChange(ctx, "%s authorized in security group %s", plural("security-group rule", ruleNames(add)), id)
	}
	return nil
}

// ownGroupFull is the user error for the Service's own security group id
// when the rules its listener ports and source ranges make do not fit.
func ownGroupFull(id string, err error) error {
	return backends.NewUserError(reasonSGRulesQuota, fmt.Errorf("the load balancer's security group %s cannot hold the rules the Service asks for "+
		"(one per listener port, protocol and spec.loadBalancerSourceRanges CIDR; IPv4 and IPv6 counted apart): "+
		"the account's Amazon VPC quota \"Inbound or outbound rules per security group\" (60 by default) is reached. "+
		"List fewer or wider source ranges, raise the quota in Service Quotas (its product with \"Security groups per network interface\" cannot exceed 1,000), "+
		"or bring your own security groups (annotation %s). AWS answered: %w", id, AnnotationSecurityGroups, err))
}

func permissions(rules []rule) []ec2types.IpPermission {
	sort.Slice(rules, func(i, j int) bool {
		a, b := rules[i], rules[j]
		return fmt.Sprint(a.protocol, a.port, a.to, a.source) < fmt.Sprint(b.protocol, b.port, b.to, b.source)
	})
	var out []ec2types.IpPermission
	for _, r := range rules {
		p := ec2types.IpPermission{IpProtocol: awssdk.String(r.protocol), FromPort: awssdk.Int32(r.port), ToPort: awssdk.Int32(r.to)}
		switch {
		case strings.HasPrefix(r.source, "sg-"):
			p.UserIdGroupPairs = []ec2types.UserIdGroupPair{{GroupId: awssdk.String(r.source)}}
		case strings.HasPrefix(r.source, "pl-"):
			p.PrefixListIds = []ec2types.PrefixListId{{PrefixListId: awssdk.String(r.source)}}
		case strings.Contains(r.source, ":"):
			p.Ipv6Ranges = []ec2types.Ipv6Range{{CidrIpv6: awssdk.String(r.source)}}
		default:
			p.IpRanges = []ec2types.IpRange{{CidrIp: awssdk.String(r.source)}}
		}
		out = append(out, p)
	}
	return out
}

// deleteSG deletes the Service's security group. AWS refuses while the
// deleted NLB's network interfaces linger; the error makes the caller retry.
func (l *LoadBalancer) deleteSG(ctx context.Context, n names) error {
	sg, err := l.findSG(ctx, n)
	if err != nil || sg == nil {
		return err
	}
	if err := l.revokeBackendRules(ctx, awssdk.ToString(sg.GroupId)); err != nil {
		return err
	}
	if _, err := l.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: sg.GroupId}); err != nil && !isNotFound(err) {
		return fmt.Errorf("DeleteSecurityGroup %s (retried until the deleted load balancer releases it): %w", awssdk.ToString(sg.GroupId), err)
	}
	l.forgetGroup(awssdk.ToString(sg.GroupId))
	klog.FromContext(ctx).V(2).Info("Deleted security group", "securityGroup", awssdk.ToString(sg.GroupId))
	reportChange(ctx, "security group %s (%s) deleted", n.sg, awssdk.ToString(sg.GroupId))
	return nil
}

// ownSG reports whether the NLB has the backend's security group: always
// unless the Service brings its own, and then as the backend security group
// of AnnotationManageBackendSGRules.
func (d *desiredLB) ownSG() bool { return len(d.byoSGs) == 0 || d.manageBackend }

// checkGroups makes sure the security groups the Service names exist in the
// VPC, in one DescribeSecurityGroups, before anything is changed.
func (l *LoadBalancer) checkGroups(ctx context.Context, d *desiredLB) error {
	ids := append(append([]string(nil), d.byoSGs...), d.extraSGs...)
	if len(ids) == 0 {
		return nil
	}
	found := map[string]bool{}
	if v := l.viewOf(ctx); v != nil {
		if _, all := v.snap.groups(ids); all {
			for _, id := range ids {
				found[id] = true
			}
		}
	}
	if len(found) == 0 {
		out, err := l.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
			{Name: awssdk.String("vpc-id"), Values: []string{l.settings.VPC}},
			{Name: awssdk.String("group-id"), Values: ids},
		}})
		if err != nil {
			return fmt.Errorf("DescribeSecurityGroups: %w", err)
		}
		for _, sg := range out.SecurityGroups {
			found[awssdk.ToString(sg.GroupId)] = true
		}
	}
	r := newReader(nil)
	for _, a := range []struct {
		n   annotation.Name
		ids []string
	}{{AnnotationSecurityGroups, d.byoSGs}, {AnnotationExtraSecurityGroups, d.extraSGs}} {
		for _, id := range a.ids {
			if !found[id] {
				r.Invalid(a.n, strings.Join(a.ids, ","), fmt.Sprintf("security group %s does not exist in %s; list groups of the load balancer's VPC", id, l.settings.VPC))
			}
		}
	}
	return r.Err()
}

// ensureSGs returns the security groups the NLB should have: the Service's
// own (AnnotationSecurityGroups) or the backend's, the backend's as well
// when it manages backend rules for them, then the extra ones. The
// backend's is created and its rules brought in line when it is one of
// them, with the instances' rules from it (syncBackendRules); the
// Service's groups are never changed.
func (l *LoadBalancer) ensureSGs(ctx context.Context, d *desiredLB) ([]string, error) {
	groups := append([]string(nil), d.byoSGs...)
	if d.ownSG() {
		id, err := l.ensureSG(ctx, d)
		if err != nil {
			return nil, err
		}
		if err := l.syncBackendRules(ctx, d, id); err != nil {
			return nil, err
		}
		groups = append(groups, id)
	}
	return append(groups, d.extraSGs...), nil
}

// syncSGs gives an existing NLB the wanted security groups in one
// SetSecurityGroups when they differ (an NLB made without security groups
// cannot get any: it is left as it is), then deletes the backend's own
// group when the NLB no longer uses it.
func (l *LoadBalancer) syncSGs(ctx context.Context, d *desiredLB, lb *elbtypes.LoadBalancer, want []string, fresh bool) error {
	if !fresh && len(lb.SecurityGroups) > 0 && !equalStrings(sorted(lb.SecurityGroups), sorted(want)) {
		if _, err := l.elb.SetSecurityGroups(ctx, &elbv2.SetSecurityGroupsInput{LoadBalancerArn: lb.LoadBalancerArn, SecurityGroups: want}); err != nil {
			return fmt.Errorf("SetSecurityGroups: %w", err)
		}
		klog.FromContext(ctx).V(2).Info("Changed load balancer security groups", "securityGroups", want)
		reportChange(ctx, "security groups of the load balancer set to %s", strings.Join(want, ", "))
		lb.SecurityGroups = want
	}
	if d.ownSG() {
		return nil
	}
	return l.deleteSG(ctx, d.names)
}

// ipProtocols are the IP protocols of an ELBv2 protocol: tcp for TCP and
// TLS, udp for UDP, both for TCP_UDP.
func ipProtocols(protocol string) []string {
	switch protocol {
	case "UDP":
		return []string{"udp"}
	case "TCP_UDP":
		return []string{"tcp", "udp"}
	}
	return []string{"tcp"}
}
