package awsfake

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
)

// TestRateLimitsThrottleAsAWS: with AWS's buckets on, the 41st Describe*
// in a burst is throttled (ELBv2: 400 Throttling; EC2 per action: 503
// RequestLimitExceeded once its 100 are spent), mutations have buckets of
// their own, and the bucket refills with time.
func TestRateLimitsThrottleAsAWS(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	noRetry := func(o *elbv2.Options) { o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1) }
	c.fake.SetRateLimits(&RateLimits{
		EC2Read: Bucket{Capacity: 3, Refill: 0.001}, EC2Write: Bucket{Capacity: 1, Refill: 0.001},
		ELBv2Read: Bucket{Capacity: 4, Refill: 0.001}, ELBv2Write: Bucket{Capacity: 1, Refill: 0.001},
	})
	for i := range 4 {
		if _, err := c.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{}, noRetry); err != nil {
			t.Fatalf("Describe %d within the bucket: %v", i, err)
		}
	}
	// Every Describe* shares the bucket.
	_, err := c.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{}, noRetry)
	if errorCode(err) != "Throttling" {
		t.Fatalf("5th Describe* = %v, want Throttling", err)
	}
	// A mutation is not throttled by the reads' bucket.
	if _, err := c.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String("tg"), Protocol: "TCP", Port: awssdk.Int32(80), VpcId: awssdk.String("vpc-1")}, noRetry); err != nil {
		t.Fatalf("a mutation after the reads ran out: %v", err)
	}
	ec2NoRetry := func(o *ec2.Options) { o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1) }
	for i := range 3 {
		if _, err := c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}, ec2NoRetry); err != nil {
			t.Fatalf("EC2 Describe %d: %v", i, err)
		}
	}
	// EC2's buckets are per action.
	if _, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}, ec2NoRetry); err != nil {
		t.Fatalf("another EC2 action's bucket: %v", err)
	}
	if _, err = c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}, ec2NoRetry); errorCode(err) != "RequestLimitExceeded" {
		t.Fatalf("4th DescribeSubnets = %v, want RequestLimitExceeded", err)
	}
	if got := c.fake.Throttled(); got != 2 {
		t.Errorf("Throttled() = %d, want 2", got)
	}

	// Refill: a bucket of 2 refilled at 50 a second is full again soon.
	c.fake.SetRateLimits(&RateLimits{ELBv2Read: Bucket{Capacity: 2, Refill: 50}})
	deadline := time.Now().Add(10 * time.Second)
	ok := 0
	for ok < 20 && time.Now().Before(deadline) {
		if _, err := c.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{}, noRetry); err == nil {
			ok++
		}
	}
	if ok < 20 {
		t.Errorf("only %d Describe calls got through a bucket refilled at 50/s in 10 s", ok)
	}
	c.fake.SetRateLimits(nil)
	if _, err := c.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{}, noRetry); err != nil {
		t.Errorf("rate limits off: %v", err)
	}
}
