package awsfake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
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
