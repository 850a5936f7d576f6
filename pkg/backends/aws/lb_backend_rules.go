package aws

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// backendRule is an ingress rule the backend adds to a target instance's
// security group: a protocol and port, from the backend's own group.
type backendRule struct {
	protocol string
	port     int32
}

// syncBackendRules brings the rules that name the backend's own security
// group (own) as their source in line with the Service: with
// AnnotationManageBackendSGRules on and instance targets, each target
// instance's security group allows the NodePorts (and a numeric health-check
// port); otherwise no group has such a rule. One DescribeSecurityGroups
// finds the rules there are (another one reads the instances' groups when
// some instance has several); only differences are changed.
func (l *LoadBalancer) syncBackendRules(ctx context.Context, d *desiredLB, own string) error {
	want, err := l.wantBackendRules(ctx, d)
	if err != nil {
		return err
	}
	have, err := l.backendRules(ctx, own)
	if err != nil {
		return err
	}
	for _, g := range slices.Compact(sorted(append(mapKeys(want), mapKeys(have)...))) {
		var add, remove []backendRule
		for r := range want[g] {
			if !have[g][r] {
				add = append(add, r)
			}
		}
		for r := range have[g] {
			if !want[g][r] {
				remove = append(remove, r)
			}
		}
		if err := l.changeBackendRules(ctx, g, own, add, remove); err != nil {
			return err
		}
	}
	return nil
}

// wantBackendRules returns, per instance security group, the rules the
// Service's targets need.
func (l *LoadBalancer) wantBackendRules(ctx context.Context, d *desiredLB) (map[string]map[backendRule]bool, error) {
	want := map[string]map[backendRule]bool{}
	if !d.manageBackend || d.targetType != targetInstance || len(d.targets) == 0 {
		return want, nil
	}
	rules := map[backendRule]bool{}
	for _, p := range d.ports {
		for _, proto := range ipProtocols(p.protocol) {
			rules[backendRule{protocol: proto, port: p.nodePort}] = true
		}
	}
	if port, err := strconv.Atoi(d.hc.port); err == nil {
		rules[backendRule{protocol: "tcp", port: int32(port)}] = true //nolint:gosec // a port, 1-65535.
	}
	groups, err := l.instanceGroups(ctx, d.targets)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		want[g] = rules
	}
	return want, nil
}

// instanceGroups returns the security group of each target instance that
// gets the rules, as the AWS Load Balancer Controller chooses it: the
// instance's only group, else the one tagged kubernetes.io/cluster/<id>.
//
// The targets are many (up to 1,000 a group) and their groups few: each
// group is kept once as it is found, not sorted with every target's.
func (l *LoadBalancer) instanceGroups(ctx context.Context, targets []target) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	several := map[string][]string{}
	for _, t := range targets {
		in, err := t.instance, error(nil)
		if in == nil {
			in, err = l.instances.byInstanceID(ctx, t.id)
		}
		if err != nil || in == nil {
			return nil, fmt.Errorf("looking up instance %s for its security group: %w", t.id, err)
		}
		switch len(in.SecurityGroups) {
		case 0: // nothing to allow the traffic in.
		case 1:
			if id := awssdk.ToString(in.SecurityGroups[0].GroupId); !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		default:
			// Assigned, not appended: two Nodes may name one instance.
			groups := make([]string, 0, len(in.SecurityGroups))
			for _, g := range in.SecurityGroups {
				groups = append(groups, awssdk.ToString(g.GroupId))
			}
			several[t.id] = groups
		}
	}
	if len(several) > 0 {
		tagged, err := l.clusterTaggedGroups(ctx, several)
		if err != nil {
			return nil, err
		}
		out = append(out, tagged...)
	}
	return sorted(slices.Compact(sorted(out))), nil
}

// clusterTaggedGroups picks, for each instance with several security
// groups, the one tagged as the cluster's.
func (l *LoadBalancer) clusterTaggedGroups(ctx context.Context, several map[string][]string) ([]string, error) {
	var all []string
	for _, ids := range several {
		all = append(all, ids...)
	}
	sgs, err := l.groupsByID(ctx, sorted(slices.Compact(sorted(all))))
	if err != nil {
		return nil, err
	}
	tagged := map[string]bool{}
	for _, sg := range sgs {
		if ec2Tag(sg.Tags, tagClusterPrefix+l.clusterID) != "" {
			tagged[awssdk.ToString(sg.GroupId)] = true
		}
	}
	var groups []string
	for _, inst := range sorted(mapKeys(several)) {
		var mine []string
		for _, id := range several[inst] {
			if tagged[id] {
				mine = append(mine, id)
			}
		}
		if len(mine) != 1 {
			return nil, fmt.Errorf("instance %s has security groups %v, of which %d are tagged %s; tag exactly one so the backend knows where to allow the load balancer's traffic (or set annotation %s to false)",
				inst, several[inst], len(mine), tagClusterPrefix+l.clusterID, AnnotationManageBackendSGRules)
		}
		groups = append(groups, mine[0])
	}
	return groups, nil
}

// groupsByID returns the security groups with these IDs: from a repair
// pass's snapshot when it has them all, else from AWS.
func (l *LoadBalancer) groupsByID(ctx context.Context, ids []string) ([]ec2types.SecurityGroup, error) {
	if v := l.viewOf(ctx); v != nil {
		if groups, all := v.snap.groups(ids); all {
			return groups, nil
		}
	}
	out, err := l.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: ids})
	if err != nil {
		return nil, fmt.Errorf("DescribeSecurityGroups (instances' groups): %w", err)
	}
	return out.SecurityGroups, nil
}

// backendRules returns, per security group, the rules whose source is the
// backend's own group: from a repair pass's snapshot if the reconcile has
// the group there, else from AWS.
func (l *LoadBalancer) backendRules(ctx context.Context, own string) (map[string]map[backendRule]bool, error) {
	if v := l.viewOf(ctx); v != nil {
		if have, ok := v.rulesFrom[own]; ok {
			return have, nil
		}
	}
	out, err := l.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
		{Name: awssdk.String("ip-permission.group-id"), Values: []string{own}}}})
	if err != nil {
		return nil, fmt.Errorf("DescribeSecurityGroups (rules from %s): %w", own, err)
	}
	return rulesBySource(out.SecurityGroups)[own], nil
}

// changeBackendRules removes and adds rules from own in group g. The
// removals come first: they are rules the Service no longer wants, and a
// group at AWS's rules-per-group quota takes a changed NodePort only once
// the old one's rule is gone.
func (l *LoadBalancer) changeBackendRules(ctx context.Context, g, own string, add, remove []backendRule) error {
	if len(remove) > 0 {
		if _, err := l.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: awssdk.String(g), IpPermissions: groupPermissions(remove, own)}); err != nil && !isNotFound(err) {
			return fmt.Errorf("RevokeSecurityGroupIngress %s: %w", g, err)
		}
		klog.FromContext(ctx).V(2).Info("Revoked load balancer traffic to instances", "securityGroup", g, "rules", len(remove))
		reportChange(ctx, "%s revoked in instance security group %s", plural("security-group rule", backendRuleNames(remove, own)), g)
	}
	if len(add) > 0 {
		if _, err := l.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: awssdk.String(g), IpPermissions: groupPermissions(add, own)}); err != nil {
			if errorCode(err) == codeRulesPerGroup {
				return instanceGroupFull(g, backendRuleNames(add, own), err)
			}
			return fmt.Errorf("AuthorizeSecurityGroupIngress %s: %w", g, err)
		}
		klog.FromContext(ctx).V(2).Info("Allowed load balancer traffic to instances", "securityGroup", g, "rules", len(add))
		reportChange(ctx, "%s authorized in instance security group %s", plural("security-group rule", backendRuleNames(add, own)), g)
	}
	return nil
}

// codeRulesPerGroup is AWS's answer to an AuthorizeSecurityGroupIngress
// that would give a group more rules than the account's "Inbound or
// outbound rules per security group" quota (60 by default):
// "RulesPerSecurityGroupLimitExceeded: The maximum number of rules per
// security group has been reached." (400). AWS adds none of the call's
// rules then.
const codeRulesPerGroup = "RulesPerSecurityGroupLimitExceeded"

// instanceGroupFull is the user error for an instance security group g that
// cannot take the rules the Service needs in it (names): which group, which
// quota, and the three ways out. What the Service already has in AWS
// stays; the next sync adds what is missing.
func instanceGroupFull(g string, names []string, err error) error {
	return backends.NewUserError(reasonSGRulesQuota, fmt.Errorf("instance security group %s has no room for the %s this Service's load balancer needs there "+
		"(one per NodePort and protocol, and one for a numeric health-check port): "+
		"the account's Amazon VPC quota \"Inbound or outbound rules per security group\" (60 by default) is reached, and every instance-target Service adds its rules to this group. "+
		"Raise the quota in Service Quotas (its product with \"Security groups per network interface\" cannot exceed 1,000); "+
		"or set annotation %s: \"false\" and allow the NodePort range (30000-32767 by default) from the VPC in the nodes' security group yourself; "+
		"or use IP targets (annotation %s: ip). AWS answered: %w",
		g, plural("rule", names), AnnotationManageBackendSGRules, AnnotationTargetType, err))
}

func groupPermissions(rules []backendRule, own string) []ec2types.IpPermission {
	sort.Slice(rules, func(i, j int) bool {
		return rules[i].protocol < rules[j].protocol || (rules[i].protocol == rules[j].protocol && rules[i].port < rules[j].port)
	})
	out := make([]ec2types.IpPermission, 0, len(rules))
	for _, r := range rules {
		out = append(out, ec2types.IpPermission{IpProtocol: awssdk.String(r.protocol), FromPort: awssdk.Int32(r.port), ToPort: awssdk.Int32(r.port),
			UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: awssdk.String(own)}}})
	}
	return out
}

// revokeBackendRules removes every rule whose source is own, so that the
// group can be deleted.
func (l *LoadBalancer) revokeBackendRules(ctx context.Context, own string) error {
	have, err := l.backendRules(ctx, own)
	if err != nil {
		return err
	}
	for _, g := range sorted(mapKeys(have)) {
		var remove []backendRule
		for r := range have[g] {
			remove = append(remove, r)
		}
		if err := l.changeBackendRules(ctx, g, own, nil, remove); err != nil {
			return err
		}
	}
	return nil
}
