package awsfake

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestStartAndSeed uses the fake the way a program that is not a test does:
// seeded, served on a real socket, reached through the SDK, closed.
func TestStartAndSeed(t *testing.T) {
	fake := New("us-east-1")
	vpc := fake.Seed(SeedSpec{ClusterID: "demo", Instances: 3})
	running, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: awssdk.String(running.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDDEMO", "secret", "")})
	ctx := context.Background()
	for _, role := range []string{"kubernetes.io/role/elb", "kubernetes.io/role/internal-elb"} {
		out, err := client.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
			{Name: awssdk.String("vpc-id"), Values: []string{vpc.VPCID}}, {Name: awssdk.String("tag:" + role), Values: []string{"1"}},
			{Name: awssdk.String("tag-key"), Values: []string{"kubernetes.io/cluster/demo"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Subnets) != 2 || awssdk.ToString(out.Subnets[0].AvailabilityZoneId) == "" {
			t.Errorf("%s subnets = %+v", role, out.Subnets)
		}
	}
	out, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: awssdk.String("vpc-id"), Values: []string{vpc.VPCID}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			got = append(got, awssdk.ToString(in.PrivateDnsName)+"@"+awssdk.ToString(in.Placement.AvailabilityZoneId))
		}
	}
	if len(vpc.Instances) != 3 || strings.Join(got, ",") != "ip-10-0-100-10.us-east-1.compute.internal@use1-az1,ip-10-0-101-10.us-east-1.compute.internal@use1-az2,ip-10-0-100-11.us-east-1.compute.internal@use1-az1" {
		t.Errorf("instances = %v", got)
	}
	if k := fake.LastAccessKey("DescribeInstances"); k != "AKIDDEMO" {
		t.Errorf("access key = %q", k)
	}
	resp, err := http.PostForm(running.URL, url.Values{"Action": {"DescribeInstances"}, "Version": {"2016-11-15"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("unsigned request answered %d, want 403", resp.StatusCode)
	}
	if err := running.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err == nil {
		t.Error("the fake still answers after Close")
	}
}
