package awsfake

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

type clients struct {
	fake *Server
	ec2  *ec2.Client
	elb  *elbv2.Client
	sts  *sts.Client
}

func newClients(t *testing.T) clients {
	t.Helper()
	fake := New("eu-west-1")
	fake.AddVPC("vpc-1", "10.0.0.0/16")
	fake.AddSubnet(Subnet{ID: "subnet-a", VPCID: "vpc-1", Zone: "eu-west-1a", ZoneID: "euw1-az1", CIDR: "10.0.1.0/24", Tags: map[string]string{"kubernetes.io/role/elb": "1"}})
	fake.AddSubnet(Subnet{ID: "subnet-b", VPCID: "vpc-1", Zone: "eu-west-1b", ZoneID: "euw1-az2", CIDR: "10.0.2.0/24"})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	creds := credentials.NewStaticCredentialsProvider("AKIDFAKE", "secret", "")
	retryer := func() awssdk.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts, o.MaxBackoff, o.RateLimiter = 10, time.Millisecond, ratelimit.None
		})
	}
	return clients{
		fake: fake,
		ec2:  ec2.New(ec2.Options{Region: "eu-west-1", Credentials: creds, BaseEndpoint: awssdk.String(srv.URL), Retryer: retryer()}),
		elb:  elbv2.New(elbv2.Options{Region: "eu-west-1", Credentials: creds, BaseEndpoint: awssdk.String(srv.URL), Retryer: retryer()}),
		sts:  sts.New(sts.Options{Region: "eu-west-1", Credentials: creds, BaseEndpoint: awssdk.String(srv.URL), Retryer: retryer()}),
	}
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestDescribeInstancesThroughSDK(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	for i := range 12 {
		c.fake.AddInstance(Instance{ID: fmt.Sprintf("i-%03d", i), InstanceType: "m5.large", Zone: "eu-west-1a", ZoneID: "euw1-az1", VPCID: "vpc-1",
			PrivateIPs: []string{fmt.Sprintf("10.0.1.%d", i+10), fmt.Sprintf("10.0.1.%d", i+100)}, PrivateDNSName: fmt.Sprintf("ip-10-0-1-%d.eu-west-1.compute.internal", i+10),
			PublicIP: "54.0.0.1", PublicDNSName: "ec2-54-0-0-1.compute.amazonaws.com", Tags: map[string]string{"Name": "n"}})
	}
	c.fake.AddInstance(Instance{ID: "i-other", VPCID: "vpc-2", Zone: "eu-west-1a"})

	t.Run("paginated with a VPC filter", func(t *testing.T) {
		p := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{MaxResults: awssdk.Int32(5),
			Filters: []ec2types.Filter{{Name: awssdk.String("vpc-id"), Values: []string{"vpc-1"}}}})
		var got []ec2types.Instance
		pages := 0
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, r := range out.Reservations {
				got = append(got, r.Instances...)
			}
		}
		if len(got) != 12 || pages != 3 {
			t.Fatalf("got %d instances in %d pages, want 12 in 3", len(got), pages)
		}
		in := got[0]
		if *in.InstanceId != "i-000" || *in.Placement.AvailabilityZone != "eu-west-1a" || *in.Placement.AvailabilityZoneId != "euw1-az1" ||
			in.State.Name != ec2types.InstanceStateNameRunning || *in.PrivateIpAddress != "10.0.1.10" || *in.PublicIpAddress != "54.0.0.1" ||
			len(in.NetworkInterfaces[0].PrivateIpAddresses) != 2 || in.InstanceType != ec2types.InstanceTypeM5Large || *in.Tags[0].Key != "Name" {
			t.Errorf("instance decoded wrong: %+v", in)
		}
	})
	t.Run("unknown ID is InvalidInstanceID.NotFound", func(t *testing.T) {
		_, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-000", "i-missing"}})
		if errorCode(err) != "InvalidInstanceID.NotFound" {
			t.Fatalf("err = %v, want InvalidInstanceID.NotFound", err)
		}
	})
	t.Run("filter by private DNS name", func(t *testing.T) {
		out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: awssdk.String("private-dns-name"), Values: []string{"ip-10-0-1-12.eu-west-1.compute.internal"}}}})
		if err != nil || len(out.Reservations) != 1 || *out.Reservations[0].Instances[0].InstanceId != "i-002" {
			t.Fatalf("out=%+v err=%v", out, err)
		}
	})
	t.Run("throttling is retried by the SDK", func(t *testing.T) {
		c.fake.ResetCalls()
		c.fake.Throttle(3)
		if _, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-001"}}); err != nil {
			t.Fatal(err)
		}
		if n, a := c.fake.Calls("DescribeInstances"), c.fake.Attempts("DescribeInstances"); n != 1 || a != 4 {
			t.Errorf("calls = %d, attempts = %d; want 1 call of 4 attempts (3 throttled + 1)", n, a)
		}
	})
	t.Run("outage is an error with a 5xx code", func(t *testing.T) {
		c.fake.SetOutage(true)
		defer c.fake.SetOutage(false)
		_, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		if errorCode(err) != "ServiceUnavailable" {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSecurityGroupsThroughSDK(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	out, err := c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("g"), Description: awssdk.String("d"), VpcId: awssdk.String("vpc-1"),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: []ec2types.Tag{{Key: awssdk.String("k"), Value: awssdk.String("v")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("g"), Description: awssdk.String("d"), VpcId: awssdk.String("vpc-1")})
	if errorCode(err) != "InvalidGroup.Duplicate" {
		t.Fatalf("duplicate: %v", err)
	}
	perm := []ec2types.IpPermission{{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(80), ToPort: awssdk.Int32(80), IpRanges: []ec2types.IpRange{{CidrIp: awssdk.String("10.0.0.0/8")}}}}
	if _, err := c.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: out.GroupId, IpPermissions: perm}); err != nil {
		t.Fatal(err)
	}
	d, err := c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: awssdk.String("tag:k"), Values: []string{"v"}}}})
	if err != nil || len(d.SecurityGroups) != 1 || *d.SecurityGroups[0].IpPermissions[0].IpRanges[0].CidrIp != "10.0.0.0/8" || *d.SecurityGroups[0].IpPermissions[0].FromPort != 80 {
		t.Fatalf("describe: %+v %v", d, err)
	}
	if _, err := c.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: out.GroupId, IpPermissions: perm}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: out.GroupId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: out.GroupId}); errorCode(err) != "InvalidGroup.NotFound" {
		t.Fatalf("second delete: %v", err)
	}
	sn, err := c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: awssdk.String("tag-key"), Values: []string{"kubernetes.io/role/elb"}}}})
	if err != nil || len(sn.Subnets) != 1 || *sn.Subnets[0].AvailabilityZoneId != "euw1-az1" || *sn.Subnets[0].CidrBlock != "10.0.1.0/24" {
		t.Fatalf("subnets: %+v %v", sn, err)
	}
}

func TestLoadBalancerLifecycleThroughSDK(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	c.fake.AddInstance(Instance{ID: "i-1", VPCID: "vpc-1", Zone: "eu-west-1a", PrivateIPs: []string{"10.0.1.5"}})
	c.fake.SetProvisioningPolls(1)
	tags := []elbtypes.Tag{{Key: awssdk.String("owner"), Value: awssdk.String("me")}}
	create := &elbv2.CreateLoadBalancerInput{Name: awssdk.String("lb-1"), Type: elbtypes.LoadBalancerTypeEnumNetwork, Scheme: elbtypes.LoadBalancerSchemeEnumInternal,
		Subnets: []string{"subnet-a", "subnet-b"}, Tags: tags}
	lbOut, err := c.elb.CreateLoadBalancer(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	lb := lbOut.LoadBalancers[0]
	if lb.State.Code != elbtypes.LoadBalancerStateEnumProvisioning || *lb.DNSName == "" || len(lb.AvailabilityZones) != 2 || lb.CreatedTime == nil {
		t.Fatalf("created: %+v", lb)
	}
	again, err := c.elb.CreateLoadBalancer(ctx, create)
	if err != nil || *again.LoadBalancers[0].LoadBalancerArn != *lb.LoadBalancerArn {
		t.Fatalf("idempotent create: %v", err)
	}
	create.Scheme = elbtypes.LoadBalancerSchemeEnumInternetFacing
	if _, err := c.elb.CreateLoadBalancer(ctx, create); errorCode(err) != "DuplicateLoadBalancerName" {
		t.Fatalf("conflicting create: %v", err)
	}
	var nf *elbtypes.LoadBalancerNotFoundException
	if _, err := c.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{"nope"}}); !errors.As(err, &nf) {
		t.Fatalf("describe missing: %v", err)
	}
	states := []elbtypes.LoadBalancerStateEnum{}
	for range 2 {
		d, err := c.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{"lb-1"}})
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, d.LoadBalancers[0].State.Code)
	}
	if states[0] != elbtypes.LoadBalancerStateEnumProvisioning || states[1] != elbtypes.LoadBalancerStateEnumActive {
		t.Errorf("states = %v, want provisioning then active", states)
	}
	tg, err := c.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String("tg-1"), Protocol: elbtypes.ProtocolEnumTcp, Port: awssdk.Int32(30080),
		VpcId: awssdk.String("vpc-1"), TargetType: elbtypes.TargetTypeEnumIp, HealthCheckProtocol: elbtypes.ProtocolEnumHttp, HealthCheckPort: awssdk.String("31000"), HealthCheckPath: awssdk.String("/healthz")})
	if err != nil {
		t.Fatal(err)
	}
	tgARN := tg.TargetGroups[0].TargetGroupArn
	_, err = c.elb.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tgARN, Targets: []elbtypes.TargetDescription{{Id: awssdk.String("192.168.10.4"), Port: awssdk.Int32(30080)}}})
	var it *elbtypes.InvalidTargetException
	if errorCode(err) != "ValidationError" && !errors.As(err, &it) {
		t.Fatalf("outside-VPC IP without zone all: %v", err)
	}
	_, err = c.elb.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tgARN, Targets: []elbtypes.TargetDescription{
		{Id: awssdk.String("192.168.10.4"), Port: awssdk.Int32(30080), AvailabilityZone: awssdk.String("all")}, {Id: awssdk.String("10.0.1.5")}}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.elb.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Port: awssdk.Int32(80), Protocol: elbtypes.ProtocolEnumTcp,
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tgARN}}})
	if err != nil {
		t.Fatal(err)
	}
	th, err := c.elb.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: tgARN})
	if err != nil || len(th.TargetHealthDescriptions) != 2 || th.TargetHealthDescriptions[1].TargetHealth.State != elbtypes.TargetHealthStateEnumHealthy {
		t.Fatalf("health: %+v %v", th, err)
	}
	tgs, err := c.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil || len(tgs.TargetGroups) != 1 || *tgs.TargetGroups[0].HealthCheckPath != "/healthz" || tgs.TargetGroups[0].LoadBalancerArns[0] != *lb.LoadBalancerArn {
		t.Fatalf("tgs: %+v %v", tgs, err)
	}
	td, err := c.elb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{*lb.LoadBalancerArn}})
	if err != nil || *td.TagDescriptions[0].Tags[0].Value != "me" {
		t.Fatalf("tags: %+v %v", td, err)
	}
	var inUse *elbtypes.ResourceInUseException
	if _, err := c.elb.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tgARN}); !errors.As(err, &inUse) {
		t.Fatalf("delete TG in use: %v", err)
	}
	ls, err := c.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil || len(ls.Listeners) != 1 || *ls.Listeners[0].ListenerArn != *l.Listeners[0].ListenerArn || *ls.Listeners[0].DefaultActions[0].TargetGroupArn != *tgARN {
		t.Fatalf("listeners: %+v %v", ls, err)
	}
	for _, step := range []func() error{
		func() error {
			_, err := c.elb.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn})
			return err
		},
		func() error {
			_, err := c.elb.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn})
			return err
		},
		func() error {
			_, err := c.elb.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tgARN})
			return err
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.fake.ResourceCount(); n != 0 {
		t.Errorf("%d resources left", n)
	}
	if got := c.fake.MutatingCalls(); len(got) != 11 {
		t.Errorf("mutating calls = %v", got)
	}
}

func TestSTSThroughSDK(t *testing.T) {
	c := newClients(t)
	out, err := c.sts.AssumeRole(context.Background(), &sts.AssumeRoleInput{RoleArn: awssdk.String("arn:aws:iam::123456789012:role/ccm"), RoleSessionName: awssdk.String("s")})
	if err != nil || *out.Credentials.AccessKeyId != "ASIAFAKE" || out.Credentials.Expiration == nil {
		t.Fatalf("%+v %v", out, err)
	}
}

// TestSetSubnetsThroughSDK: a network load balancer takes subnets in new
// zones, and can drop a zone, but a zone's subnet cannot be changed in one
// call, as the ELBv2 API reference and the NLB guide say.
func TestSetSubnetsThroughSDK(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	c.fake.AddSubnet(Subnet{ID: "subnet-a2", VPCID: "vpc-1", Zone: "eu-west-1a", CIDR: "10.0.3.0/24"})
	c.fake.AddVPC("vpc-2", "10.1.0.0/16")
	c.fake.AddSubnet(Subnet{ID: "subnet-x", VPCID: "vpc-2", Zone: "eu-west-1c", CIDR: "10.1.0.0/24"})
	out, err := c.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String("lb-1"), Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: []string{"subnet-a"}})
	if err != nil {
		t.Fatal(err)
	}
	arn := out.LoadBalancers[0].LoadBalancerArn
	set, err := c.elb.SetSubnets(ctx, &elbv2.SetSubnetsInput{LoadBalancerArn: arn, Subnets: []string{"subnet-a", "subnet-b"}})
	if err != nil || len(set.AvailabilityZones) != 2 {
		t.Fatalf("adding a zone: %+v, %v", set, err)
	}
	for name, subnets := range map[string][]string{
		"changing zone a's subnet": {"subnet-a2", "subnet-b"},
		"two subnets in zone a":    {"subnet-a", "subnet-a2"},
		"another VPC's subnet":     {"subnet-a", "subnet-x"},
	} {
		if _, err := c.elb.SetSubnets(ctx, &elbv2.SetSubnetsInput{LoadBalancerArn: arn, Subnets: subnets}); errorCode(err) != "InvalidConfigurationRequest" {
			t.Errorf("%s: %v, want InvalidConfigurationRequest", name, err)
		}
	}
	if _, err := c.elb.SetSubnets(ctx, &elbv2.SetSubnetsInput{LoadBalancerArn: arn, Subnets: []string{"subnet-b"}}); err != nil {
		t.Fatalf("removing a zone: %v", err)
	}
	if lbs := c.fake.LoadBalancers(); len(lbs) != 1 || fmt.Sprint(lbs[0].Subnets) != "[subnet-b]" || lbs[0].DNSName != *out.LoadBalancers[0].DNSName {
		t.Errorf("load balancer after the changes: %+v", lbs)
	}
}

// TestFailMutationsAfter: n mutating calls succeed, later ones fail until
// cleared; reads are never failed.
func TestFailMutationsAfter(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	c.fake.FailMutationsAfter(1)
	create := func(name string) error {
		_, err := c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String(name), Description: awssdk.String("d"), VpcId: awssdk.String("vpc-1")})
		return err
	}
	if err := create("a"); err != nil {
		t.Fatal(err)
	}
	if err := create("b"); errorCode(err) != "AccessDenied" {
		t.Fatalf("second create: %v, want AccessDenied", err)
	}
	if _, err := c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{}); err != nil {
		t.Fatal(err)
	}
	c.fake.ClearMutationFailures()
	if err := create("b"); err != nil {
		t.Fatal(err)
	}
	if sgs := c.fake.SecurityGroups(); len(sgs) != 2 {
		t.Errorf("security groups = %+v", sgs)
	}
}

// TestSecurityGroupPagesThroughSDK: MaxResults (5 to 1000) pages the
// groups, which the SDK's paginator follows; outside that range is an
// error.
func TestSecurityGroupPagesThroughSDK(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	for i := range 12 {
		if _, err := c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String(fmt.Sprintf("g%d", i)), Description: awssdk.String("d"), VpcId: awssdk.String("vpc-1")}); err != nil {
			t.Fatal(err)
		}
	}
	c.fake.ResetCalls()
	seen := map[string]bool{}
	p := ec2.NewDescribeSecurityGroupsPaginator(c.ec2, &ec2.DescribeSecurityGroupsInput{MaxResults: awssdk.Int32(5)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sg := range page.SecurityGroups {
			seen[awssdk.ToString(sg.GroupId)] = true
		}
	}
	if len(seen) != 12 || c.fake.Calls("DescribeSecurityGroups") != 3 {
		t.Errorf("%d groups in %d calls, want 12 in 3", len(seen), c.fake.Calls("DescribeSecurityGroups"))
	}
	if _, err := c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{MaxResults: awssdk.Int32(1001)}); errorCode(err) != "InvalidParameterValue" {
		t.Errorf("MaxResults 1001: %v, want InvalidParameterValue", err)
	}
}

// TestParameters: the fake records the parameters each action is sent,
// list indexes as N.
func TestParameters(t *testing.T) {
	c := newClients(t)
	_, err := c.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{MaxResults: awssdk.Int32(5),
		Filters: []ec2types.Filter{{Name: awssdk.String("vpc-id"), Values: []string{"vpc-1", "vpc-2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.fake.Parameters()["DescribeInstances"], " ")
	if want := "Filter.N.Name Filter.N.Value.N MaxResults"; got != want {
		t.Errorf("DescribeInstances parameters %q, want %q", got, want)
	}
}

// TestRetriesAreOneCall: a call the SDK retries (throttled once) counts as
// one call of the action, two attempts; a request without the SDK's
// attempt header counts as a call of its own.
func TestRetriesAreOneCall(t *testing.T) {
	c := newClients(t)
	c.fake.FailNext("DescribeSecurityGroups", "Throttling")
	if _, err := c.ec2.DescribeSecurityGroups(context.Background(), &ec2.DescribeSecurityGroupsInput{}); err != nil {
		t.Fatalf("DescribeSecurityGroups after a throttled attempt: %v", err)
	}
	if calls, attempts := c.fake.Calls("DescribeSecurityGroups"), c.fake.Attempts("DescribeSecurityGroups"); calls != 1 || attempts != 2 {
		t.Errorf("calls %d, attempts %d; want 1 call of 2 attempts", calls, attempts)
	}
	for header, first := range map[string]bool{"": true, "attempt=1; max=3": true, "attempt=2; max=3": false, "max=3; attempt=3": false, "garbage": true} {
		if got := firstAttempt(header); got != first {
			t.Errorf("firstAttempt(%q) = %v, want %v", header, got, first)
		}
	}
}

// TestIPv6TargetGroupsThroughSDK: a subnet's IPv6 block is answered in
// ipv6CidrBlockAssociationSet; a target group keeps its IpAddressType
// (ipv4 by default, ipv6 on request) and takes only targets of its family,
// refusing the other one with ValidationError as AWS does.
func TestIPv6TargetGroupsThroughSDK(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	c.fake.AddSubnet(Subnet{ID: "subnet-6", VPCID: "vpc-1", Zone: "eu-west-1a", ZoneID: "euw1-az1", CIDR: "10.0.6.0/24", IPv6CIDR: "2001:db8:0:6::/64"})
	sn, err := c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-6", "subnet-a"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sn.Subnets {
		var blocks []string
		for _, a := range s.Ipv6CidrBlockAssociationSet {
			blocks = append(blocks, awssdk.ToString(a.Ipv6CidrBlock)+"/"+string(a.Ipv6CidrBlockState.State))
		}
		want := ""
		if awssdk.ToString(s.SubnetId) == "subnet-6" {
			want = "2001:db8:0:6::/64/associated"
		}
		if got := strings.Join(blocks, ","); got != want {
			t.Errorf("subnet %s IPv6 blocks %q, want %q", awssdk.ToString(s.SubnetId), got, want)
		}
	}
	create := func(name string, ipType elbtypes.TargetGroupIpAddressTypeEnum) (string, error) {
		out, err := c.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String(name), Protocol: elbtypes.ProtocolEnumTcp, Port: awssdk.Int32(80),
			VpcId: awssdk.String("vpc-1"), TargetType: elbtypes.TargetTypeEnumIp, IpAddressType: ipType})
		if err != nil {
			return "", err
		}
		if got, want := out.TargetGroups[0].IpAddressType, ipType; got != want && (want != "" || got != elbtypes.TargetGroupIpAddressTypeEnumIpv4) {
			t.Errorf("%s: IpAddressType %q, want %q", name, got, want)
		}
		return awssdk.ToString(out.TargetGroups[0].TargetGroupArn), nil
	}
	v4, err := create("v4", "")
	if err != nil {
		t.Fatal(err)
	}
	v6, err := create("v6", elbtypes.TargetGroupIpAddressTypeEnumIpv6)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create("bad", "ipv5"); errorCode(err) != "ValidationError" {
		t.Errorf("IpAddressType ipv5: %v, want ValidationError", err)
	}
	register := func(arn, ip string) error {
		_, err := c.elb.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: awssdk.String(arn), Targets: []elbtypes.TargetDescription{{Id: awssdk.String(ip), Port: awssdk.Int32(30080)}}})
		return err
	}
	for _, tc := range []struct{ arn, ip, code string }{
		{v6, "2001:db8:0:6::10", ""},
		{v4, "10.0.6.10", ""},
		{v4, "2001:db8:0:6::11", "ValidationError"},
		{v6, "10.0.6.11", "ValidationError"},
		{v6, "2001:db8:ffff::1", "InvalidTarget"},
	} {
		if err := register(tc.arn, tc.ip); errorCode(err) != tc.code {
			t.Errorf("registering %s: %v, want %q", tc.ip, err, tc.code)
		}
	}
	out, err := c.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{TargetGroupArns: []string{v6}})
	if err != nil || out.TargetGroups[0].IpAddressType != elbtypes.TargetGroupIpAddressTypeEnumIpv6 {
		t.Errorf("DescribeTargetGroups %v, %v; want IpAddressType ipv6", out, err)
	}
}

// TestIPv6TargetGroupsNeedDualStack: an IPv6 target group is attached
// (CreateListener, ModifyListener) only to a dualstack load balancer, and a
// load balancer whose listener forwards to one cannot go back to ipv4; both
// refusals are ValidationErrors, as AWS answers them.
func TestIPv6TargetGroupsNeedDualStack(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	c.fake.AddSubnet(Subnet{ID: "subnet-6", VPCID: "vpc-1", Zone: "eu-west-1a", ZoneID: "euw1-az1", CIDR: "10.0.6.0/24", IPv6CIDR: "2001:db8:0:6::/64"})
	lbOut, err := c.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String("dual"), Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: []string{"subnet-6"}})
	if err != nil {
		t.Fatal(err)
	}
	lbARN := lbOut.LoadBalancers[0].LoadBalancerArn
	tg := func(name string, ipType elbtypes.TargetGroupIpAddressTypeEnum) *string {
		out, err := c.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String(name), Protocol: elbtypes.ProtocolEnumTcp, Port: awssdk.Int32(80),
			VpcId: awssdk.String("vpc-1"), TargetType: elbtypes.TargetTypeEnumIp, IpAddressType: ipType})
		if err != nil {
			t.Fatal(err)
		}
		return out.TargetGroups[0].TargetGroupArn
	}
	v4, v6 := tg("v4", ""), tg("v6", elbtypes.TargetGroupIpAddressTypeEnumIpv6)
	forward := func(arn *string) []elbtypes.Action {
		return []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: arn}}
	}
	_, err = c.elb.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lbARN, Port: awssdk.Int32(80), Protocol: elbtypes.ProtocolEnumTcp, DefaultActions: forward(v6)})
	if errorCode(err) != "ValidationError" || !strings.Contains(err.Error(), "IPv6 target group") {
		t.Fatalf("CreateListener to an IPv6 group on an ipv4 NLB: %v, want ValidationError", err)
	}
	ls, err := c.elb.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lbARN, Port: awssdk.Int32(80), Protocol: elbtypes.ProtocolEnumTcp, DefaultActions: forward(v4)})
	if err != nil {
		t.Fatal(err)
	}
	lsARN := ls.Listeners[0].ListenerArn
	if _, err := c.elb.ModifyListener(ctx, &elbv2.ModifyListenerInput{ListenerArn: lsARN, DefaultActions: forward(v6)}); errorCode(err) != "ValidationError" {
		t.Fatalf("ModifyListener to an IPv6 group on an ipv4 NLB: %v, want ValidationError", err)
	}
	setType := func(ipType elbtypes.IpAddressType) error {
		_, err := c.elb.SetIpAddressType(ctx, &elbv2.SetIpAddressTypeInput{LoadBalancerArn: lbARN, IpAddressType: ipType})
		return err
	}
	if err := setType(elbtypes.IpAddressTypeDualstack); err != nil {
		t.Fatal(err)
	}
	if _, err := c.elb.ModifyListener(ctx, &elbv2.ModifyListenerInput{ListenerArn: lsARN, DefaultActions: forward(v6)}); err != nil {
		t.Fatalf("ModifyListener to an IPv6 group on a dualstack NLB: %v", err)
	}
	if err := setType(elbtypes.IpAddressTypeIpv4); errorCode(err) != "ValidationError" || !strings.Contains(err.Error(), "'v6'") {
		t.Fatalf("SetIpAddressType ipv4 with an IPv6 group attached: %v, want ValidationError naming it", err)
	}
	if _, err := c.elb.ModifyListener(ctx, &elbv2.ModifyListenerInput{ListenerArn: lsARN, DefaultActions: forward(v4)}); err != nil {
		t.Fatal(err)
	}
	if err := setType(elbtypes.IpAddressTypeIpv4); err != nil {
		t.Fatalf("SetIpAddressType ipv4 once the listener forwards to an IPv4 group: %v", err)
	}
	if lbs := c.fake.LoadBalancers(); lbs[0].IPAddressType != "ipv4" {
		t.Errorf("IP address type %s, want ipv4", lbs[0].IPAddressType)
	}
}

// TestIPv6SecurityGroupRulesThroughSDK: ingress rules from IPv6 CIDRs go in
// Ipv6Ranges (CidrIpv6) and are answered there; an IPv6 CIDR in IpRanges
// or an IPv4 one in Ipv6Ranges is malformed (InvalidParameterValue), as in
// EC2.
func TestIPv6SecurityGroupRulesThroughSDK(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	sg, err := c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("g"), Description: awssdk.String("d"), VpcId: awssdk.String("vpc-1")})
	if err != nil {
		t.Fatal(err)
	}
	perm := func(v4, v6 string) []ec2types.IpPermission {
		p := ec2types.IpPermission{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(80), ToPort: awssdk.Int32(80)}
		if v4 != "" {
			p.IpRanges = []ec2types.IpRange{{CidrIp: awssdk.String(v4)}}
		}
		if v6 != "" {
			p.Ipv6Ranges = []ec2types.Ipv6Range{{CidrIpv6: awssdk.String(v6)}}
		}
		return []ec2types.IpPermission{p}
	}
	authorize := func(p []ec2types.IpPermission) error {
		_, err := c.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: p})
		return err
	}
	for _, bad := range [][]ec2types.IpPermission{perm("::/0", ""), perm("", "0.0.0.0/0")} {
		if err := authorize(bad); errorCode(err) != "InvalidParameterValue" {
			t.Errorf("authorizing %+v: %v, want InvalidParameterValue", bad, err)
		}
	}
	if err := authorize(perm("0.0.0.0/0", "::/0")); err != nil {
		t.Fatal(err)
	}
	out, err := c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{awssdk.ToString(sg.GroupId)}})
	if err != nil {
		t.Fatal(err)
	}
	var v4, v6 []string
	for _, p := range out.SecurityGroups[0].IpPermissions {
		for _, r := range p.IpRanges {
			v4 = append(v4, awssdk.ToString(r.CidrIp))
		}
		for _, r := range p.Ipv6Ranges {
			v6 = append(v6, awssdk.ToString(r.CidrIpv6))
		}
	}
	if strings.Join(v4, ",") != "0.0.0.0/0" || strings.Join(v6, ",") != "::/0" {
		t.Errorf("IpRanges %v, Ipv6Ranges %v; want 0.0.0.0/0 and ::/0", v4, v6)
	}
	if _, err := c.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: perm("", "::/0")}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.fake.SecurityGroupIngress(awssdk.ToString(sg.GroupId)), ","); got != "tcp:80-80:0.0.0.0/0" {
		t.Errorf("ingress after revoking ::/0: %s", got)
	}
}
