package aws

import (
	"errors"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestDryRunGuardRefusesMutations: a mutating call that slips past the
// read-only mode (made on the SDK client itself) is refused by the guard
// in the SDK's stack under a dry-run ctx, and reaches AWS otherwise; reads
// pass either way.
func TestDryRunGuardRefusesMutations(t *testing.T) {
	e := newEnv(t)
	ctx, _ := backends.WithDryRun(t.Context())
	ec2c := e.cloud.lb.ec2.(dryRunEC2).EC2API
	elbc := e.cloud.lb.elb.(dryRunELB).ELBAPI
	_, err := ec2c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("x"), Description: awssdk.String("x"), VpcId: awssdk.String(testVPC)})
	if !errors.Is(err, backends.ErrMutationInDryRun) {
		t.Errorf("CreateSecurityGroup under a dry run: %v, want ErrMutationInDryRun", err)
	}
	_, err = elbc.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: awssdk.String("arn:x")})
	if !errors.Is(err, backends.ErrMutationInDryRun) {
		t.Errorf("DeleteLoadBalancer under a dry run: %v, want ErrMutationInDryRun", err)
	}
	if _, err := elbc.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{}); err != nil {
		t.Errorf("DescribeLoadBalancers under a dry run: %v", err)
	}
	if n := len(e.fake.MutatingCalls()); n != 0 {
		t.Errorf("the fake saw %d mutating calls under a dry run, want 0: %v", n, e.fake.MutatingCalls())
	}
	if _, err := ec2c.CreateSecurityGroup(t.Context(), &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("x"), Description: awssdk.String("x"), VpcId: awssdk.String(testVPC)}); err != nil {
		t.Errorf("CreateSecurityGroup outside a dry run: %v", err)
	}
	if n := len(e.fake.MutatingCalls()); n != 1 {
		t.Errorf("the fake saw %d mutating calls, want 1", n)
	}
}
