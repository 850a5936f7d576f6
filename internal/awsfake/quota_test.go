package awsfake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ipTargets returns n IP targets of the fake's VPC from the first.
func ipTargets(first, n int) []elbtypes.TargetDescription {
	var out []elbtypes.TargetDescription
	for i := first; i < first+n; i++ {
		out = append(out, elbtypes.TargetDescription{Id: awssdk.String(fmt.Sprintf("10.0.%d.%d", 10+i/250, 1+i%250))})
	}
	return out
}

// TestTargetsPerTargetGroupQuota: a group takes AWS's default of 1,000
// targets and refuses the 1,001st with TooManyTargets (400), as AWS does;
// registering a target again, or in place of a drained one, fits;
// SetTargetsPerTargetGroup moves the quota and 0 lifts it.
func TestTargetsPerTargetGroupQuota(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	c.fake.SetDeregistrationDelay(0)
	out, err := c.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String("tg-ip"), Protocol: elbtypes.ProtocolEnumTcp,
		Port: awssdk.Int32(80), VpcId: awssdk.String("vpc-1"), TargetType: elbtypes.TargetTypeEnumIp})
	if err != nil {
		t.Fatal(err)
	}
	tg := out.TargetGroups[0].TargetGroupArn
	register := func(ts []elbtypes.TargetDescription) error {
		_, err := c.elb.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tg, Targets: ts})
		return err
	}
	for first := 0; first < DefaultTargetsPerTargetGroup; first += 500 {
		if err := register(ipTargets(first, 500)); err != nil {
			t.Fatalf("targets %d to %d: %v", first, first+499, err)
		}
	}
	if err := register(ipTargets(0, 10)); err != nil {
		t.Fatalf("registering registered targets again: %v", err)
	}
	err = register(ipTargets(DefaultTargetsPerTargetGroup, 1))
	var tooMany *elbtypes.TooManyTargetsException
	var resp *smithyhttp.ResponseError
	if !errors.As(err, &tooMany) || !errors.As(err, &resp) || resp.HTTPStatusCode() != 400 ||
		tooMany.ErrorMessage() != fmt.Sprintf("The maximum number of targets per target group '1000' has been reached on target group '%s'", *tg) {
		t.Fatalf("target 1,001: %v, want TooManyTargets (400) naming the quota and the group", err)
	}
	if _, err := c.elb.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: tg, Targets: ipTargets(0, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := register(ipTargets(DefaultTargetsPerTargetGroup, 1)); err != nil {
		t.Fatalf("target 1,001 in place of a deregistered one: %v", err)
	}
	c.fake.SetTargetsPerTargetGroup(1001)
	if err := register(ipTargets(DefaultTargetsPerTargetGroup+1, 1)); err != nil {
		t.Fatalf("target 1,001 with a quota of 1,001: %v", err)
	}
	c.fake.SetTargetsPerTargetGroup(0)
	if err := register(ipTargets(DefaultTargetsPerTargetGroup+2, 100)); err != nil {
		t.Fatalf("no quota: %v", err)
	}
	h, err := c.elb.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: tg})
	if err != nil || len(h.TargetHealthDescriptions) != 1101 {
		t.Fatalf("targets registered: %v, %v; want 1,101", err, h)
	}
	if !strings.Contains(tooMany.Error(), "TooManyTargets") {
		t.Errorf("error %q does not name TooManyTargets", tooMany.Error())
	}
}

// TestRulesPerSecurityGroupQuota: a group takes AWS's default of 60
// inbound rules and refuses more with RulesPerSecurityGroupLimitExceeded
// (400), the whole call changing nothing; IPv4 and IPv6 rules are counted
// apart and a rule from a security group counts in both, as AWS counts
// them; a revoked rule frees its place; SetRulesPerSecurityGroup moves
// the quota and 0 lifts it.
func TestRulesPerSecurityGroupQuota(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	group := func(name string) *string { return newSecurityGroup(ctx, t, c, name) }
	nodes, lb := group("nodes"), group("lb")
	fromGroup := func(from, n int) []ec2types.IpPermission {
		var out []ec2types.IpPermission
		for port := from; port < from+n; port++ {
			out = append(out, ec2types.IpPermission{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(int32(port)), ToPort: awssdk.Int32(int32(port)),
				UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: lb}}})
		}
		return out
	}
	fromCIDRs := func(port int32, cidrs ...string) []ec2types.IpPermission {
		p := ec2types.IpPermission{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(port), ToPort: awssdk.Int32(port)}
		for _, cidr := range cidrs {
			if strings.Contains(cidr, ":") {
				p.Ipv6Ranges = append(p.Ipv6Ranges, ec2types.Ipv6Range{CidrIpv6: awssdk.String(cidr)})
			} else {
				p.IpRanges = append(p.IpRanges, ec2types.IpRange{CidrIp: awssdk.String(cidr)})
			}
		}
		return []ec2types.IpPermission{p}
	}
	authorize := func(ps []ec2types.IpPermission) error {
		_, err := c.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: nodes, IpPermissions: ps})
		return err
	}
	full := func(what string, err error) {
		t.Helper()
		var ae smithy.APIError
		var resp *smithyhttp.ResponseError
		if !errors.As(err, &ae) || !errors.As(err, &resp) || ae.ErrorCode() != "RulesPerSecurityGroupLimitExceeded" || resp.HTTPStatusCode() != 400 ||
			ae.ErrorMessage() != "The maximum number of rules per security group has been reached." {
			t.Fatalf("%s: %v, want RulesPerSecurityGroupLimitExceeded (400)", what, err)
		}
	}
	if err := authorize(fromGroup(30000, 58)); err != nil {
		t.Fatalf("58 rules: %v", err)
	}
	// Three sources on one port are three rules: 61.
	full("58 + 3 rules", authorize(fromCIDRs(80, "10.0.0.0/8", "10.1.0.0/16", "10.2.0.0/16")))
	if n := len(c.fake.SecurityGroupIngress(*nodes)); n != 58 {
		t.Fatalf("a refused call left %d rules, want 58", n)
	}
	if err := authorize(fromCIDRs(80, "10.0.0.0/8", "10.1.0.0/16")); err != nil {
		t.Fatalf("58 + 2 IPv4 rules: %v", err)
	}
	// IPv6 rules are counted apart: 58 from the group, and 2 IPv6 fit.
	if err := authorize(fromCIDRs(80, "2001:db8::/32", "2001:db9::/32")); err != nil {
		t.Fatalf("58 + 2 IPv6 rules: %v", err)
	}
	full("61st IPv4 rule", authorize(fromCIDRs(443, "192.168.0.0/16")))
	full("61st IPv6 rule", authorize(fromCIDRs(443, "2001:dba::/32")))
	full("61st rule from a group", authorize(fromGroup(31000, 1)))
	if _, err := c.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: nodes, IpPermissions: fromGroup(30000, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := authorize(fromGroup(31000, 1)); err != nil {
		t.Fatalf("a rule in place of a revoked one: %v", err)
	}
	c.fake.SetRulesPerSecurityGroup(61)
	if err := authorize(fromCIDRs(443, "192.168.0.0/16")); err != nil {
		t.Fatalf("61st IPv4 rule with a quota of 61: %v", err)
	}
	c.fake.SetRulesPerSecurityGroup(0)
	if err := authorize(fromGroup(32000, 100)); err != nil {
		t.Fatalf("no quota: %v", err)
	}
	if n := len(c.fake.SecurityGroupIngress(*nodes)); n != 58+2+2+1+100 {
		t.Fatalf("%d rules, want 163", n)
	}
}
