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

// TestBucketCallsAndLeast: the fake counts calls by the AWS bucket each
// takes its token from, whether its throttling is on or not (ELBv2's
// Describe* share one, its mutations and EC2's actions one each), and
// Least gives the time AWS's buckets need for them: the busiest bucket's
// calls beyond its size at its refill rate.
func TestBucketCallsAndLeast(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	for range 3 {
		if _, err := c.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
			t.Fatal(err)
		}
	}
	got := c.fake.BucketCalls()
	want := map[string]int{"elbv2/describe": 6, "ec2/DescribeInstances": 3}
	if len(got) != len(want) || got["elbv2/describe"] != 6 || got["ec2/DescribeInstances"] != 3 {
		t.Errorf("bucket calls %v, want %v", got, want)
	}
	least, by := AWSRateLimits.Least(map[string]int{"elbv2/describe": 6040, "elbv2/CreateLoadBalancer": 1000, "ec2/DescribeSecurityGroups": 2000, "ec2/CreateSecurityGroup": 1000})
	if least != 600*time.Second || by != "elbv2/describe" {
		t.Errorf("least %v by %s, want 600s by elbv2/describe ((6,040 − 40) / 10)", least, by)
	}
	if least, _ := AWSRateLimits.Least(map[string]int{"elbv2/CreateLoadBalancer": 20, "ec2/DescribeInstances": 100}); least != 0 {
		t.Errorf("calls within the buckets' sizes need %v, want 0", least)
	}
	c.fake.ResetCalls()
	if got := c.fake.BucketCalls(); len(got) != 0 {
		t.Errorf("after ResetCalls: %v", got)
	}
}
