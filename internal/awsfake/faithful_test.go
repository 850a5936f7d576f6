package awsfake

import (
	"context"
	"fmt"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
)

// The actions and parameters upstream's cloud-provider-aws sends besides
// ours, through the SDK as it sends them.

func TestDescribeAvailabilityZones(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	out, err := c.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, z := range out.AvailabilityZones {
		got[awssdk.ToString(z.ZoneName)] = awssdk.ToString(z.ZoneId)
		if z.State != ec2types.AvailabilityZoneStateAvailable || awssdk.ToString(z.RegionName) != "eu-west-1" || awssdk.ToString(z.ZoneType) != "availability-zone" {
			t.Errorf("zone %+v: want available, eu-west-1, availability-zone", z)
		}
	}
	if len(got) != 2 || got["eu-west-1a"] != "euw1-az1" || got["eu-west-1b"] != "euw1-az2" {
		t.Errorf("zones %v; want eu-west-1a=euw1-az1 and eu-west-1b=euw1-az2", got)
	}
	out, err = c.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{ZoneIds: []string{"euw1-az2"}})
	if err != nil || len(out.AvailabilityZones) != 1 || awssdk.ToString(out.AvailabilityZones[0].ZoneName) != "eu-west-1b" {
		t.Errorf("by zone ID: %+v, %v; want eu-west-1b", out, err)
	}
	if _, err := c.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"eu-west-1z"}}); errorCode(err) != "InvalidParameterValue" {
		t.Errorf("unknown zone: %v; want InvalidParameterValue", err)
	}
}

func TestDescribeInstanceTopology(t *testing.T) {
	c := newClients(t)
	c.fake.AddInstance(Instance{ID: "i-gpu", InstanceType: "p4d.24xlarge", Zone: "eu-west-1a", ZoneID: "euw1-az1", VPCID: "vpc-1"})
	c.fake.AddInstance(Instance{ID: "i-web", InstanceType: "m5.large", Zone: "eu-west-1a", ZoneID: "euw1-az1", VPCID: "vpc-1"})
	out, err := c.ec2.DescribeInstanceTopology(context.Background(), &ec2.DescribeInstanceTopologyInput{InstanceIds: []string{"i-gpu", "i-web", "i-gone"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 1 || awssdk.ToString(out.Instances[0].InstanceId) != "i-gpu" || len(out.Instances[0].NetworkNodes) != 3 ||
		awssdk.ToString(out.Instances[0].ZoneId) != "euw1-az1" {
		t.Errorf("topology %+v; want i-gpu alone (m5 is not described, unknown IDs are left out), three network nodes, zone euw1-az1", out.Instances)
	}
	if _, err := c.ec2.DescribeInstanceTopology(context.Background(), &ec2.DescribeInstanceTopologyInput{MaxResults: awssdk.Int32(101)}); errorCode(err) != "InvalidParameterValue" {
		t.Errorf("MaxResults 101: %v; want InvalidParameterValue", err)
	}
}

func TestSeededRouteTablesAndGroups(t *testing.T) {
	c := newClients(t)
	seeded := c.fake.Seed(SeedSpec{VPCID: "vpc-2", ClusterID: "k", Instances: 2, NodeSecurityGroup: true})
	ctx := context.Background()
	out, err := c.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{{Name: awssdk.String("vpc-id"), Values: []string{"vpc-2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]ec2types.RouteTable{}
	for _, rt := range out.RouteTables {
		byID[awssdk.ToString(rt.RouteTableId)] = rt
	}
	main, public := byID[seeded.MainRouteTable], byID[seeded.PublicRouteTable]
	if len(byID) != 2 || len(main.Associations) != 1 || !awssdk.ToBool(main.Associations[0].Main) {
		t.Fatalf("route tables %+v; want the main one (main association) and the public one", out.RouteTables)
	}
	if awssdk.ToString(main.Routes[0].GatewayId) != "local" || len(main.Routes) != 1 {
		t.Errorf("main table routes %+v; want the local route only", main.Routes)
	}
	var assoc []string
	for _, a := range public.Associations {
		assoc = append(assoc, awssdk.ToString(a.SubnetId))
	}
	if len(assoc) != len(seeded.PublicSubnets) || assoc[0] != seeded.PublicSubnets[0] || awssdk.ToString(public.Routes[1].GatewayId) != seeded.InternetGateway {
		t.Errorf("public table associations %v, routes %+v; want %v and 0.0.0.0/0 to %s", assoc, public.Routes, seeded.PublicSubnets, seeded.InternetGateway)
	}
	out, err = c.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{{Name: awssdk.String("association.main"), Values: []string{"true"}}}})
	if err != nil || len(out.RouteTables) != 1 || awssdk.ToString(out.RouteTables[0].RouteTableId) != seeded.MainRouteTable {
		t.Errorf("association.main=true: %+v, %v; want the main table", out, err)
	}
	insts, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{seeded.Instances[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	in := insts.Reservations[0].Instances[0]
	if len(in.SecurityGroups) != 1 || awssdk.ToString(in.SecurityGroups[0].GroupId) != seeded.NodeSecurityGroup || awssdk.ToString(in.SecurityGroups[0].GroupName) != "k8s-nodes-k" {
		t.Errorf("instance groupSet %+v; want %s (k8s-nodes-k)", in.SecurityGroups, seeded.NodeSecurityGroup)
	}
	if _, err := c.ec2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{seeded.Instances[0].ID}, Tags: []ec2types.Tag{{Key: awssdk.String("absent")}}}); err != nil {
		t.Errorf("DeleteTags: %v", err)
	}
}

func TestSubnetMappingsAndAttributes(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	created, err := c.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String("mapped"), Type: elbtypes.LoadBalancerTypeEnumNetwork,
		Scheme: elbtypes.LoadBalancerSchemeEnumInternal, SubnetMappings: []elbtypes.SubnetMapping{{SubnetId: awssdk.String("subnet-a"), PrivateIPv4Address: awssdk.String("10.0.1.20")}, {SubnetId: awssdk.String("subnet-b")}}})
	if err != nil {
		t.Fatal(err)
	}
	lb := created.LoadBalancers[0]
	if len(lb.AvailabilityZones) != 2 || len(lb.AvailabilityZones[0].LoadBalancerAddresses) != 1 ||
		awssdk.ToString(lb.AvailabilityZones[0].LoadBalancerAddresses[0].PrivateIPv4Address) != "10.0.1.20" {
		t.Fatalf("load balancer zones %+v; want both subnets, 10.0.1.20 in subnet-a", lb.AvailabilityZones)
	}
	if _, err := c.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String("outside"), Type: elbtypes.LoadBalancerTypeEnumNetwork,
		Scheme: elbtypes.LoadBalancerSchemeEnumInternal, SubnetMappings: []elbtypes.SubnetMapping{{SubnetId: awssdk.String("subnet-a"), PrivateIPv4Address: awssdk.String("10.9.9.9")}}}); errorCode(err) != "InvalidConfigurationRequest" {
		t.Errorf("address outside its subnet: %v; want InvalidConfigurationRequest", err)
	}
	arn := lb.LoadBalancerArn
	attrs, err := c.elb.DescribeLoadBalancerAttributes(ctx, &elbv2.DescribeLoadBalancerAttributesInput{LoadBalancerArn: arn})
	if err != nil || attr(attrs.Attributes, "load_balancing.cross_zone.enabled") != "false" {
		t.Fatalf("attributes %+v, %v; want cross-zone false by default", attrs, err)
	}
	if _, err := c.elb.ModifyLoadBalancerAttributes(ctx, &elbv2.ModifyLoadBalancerAttributesInput{LoadBalancerArn: arn,
		Attributes: []elbtypes.LoadBalancerAttribute{{Key: awssdk.String("deletion_protection.enabled"), Value: awssdk.String("true")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.elb.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: arn}); errorCode(err) != "OperationNotPermitted" {
		t.Errorf("delete with deletion protection: %v; want OperationNotPermitted", err)
	}
	if _, err := c.elb.ModifyLoadBalancerAttributes(ctx, &elbv2.ModifyLoadBalancerAttributesInput{LoadBalancerArn: arn,
		Attributes: []elbtypes.LoadBalancerAttribute{{Key: awssdk.String("no.such"), Value: awssdk.String("1")}}}); errorCode(err) != "ValidationError" {
		t.Errorf("unknown attribute: %v; want ValidationError", err)
	}
	if _, err := c.elb.SetSecurityGroups(ctx, &elbv2.SetSecurityGroupsInput{LoadBalancerArn: arn, SecurityGroups: []string{}}); err != nil {
		t.Errorf("SetSecurityGroups to none on a load balancer without any: %v", err)
	}

	tg, err := c.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String("tg"), Protocol: elbtypes.ProtocolEnumTcp, Port: awssdk.Int32(30080),
		VpcId: awssdk.String("vpc-1"), TargetType: elbtypes.TargetTypeEnumInstance})
	if err != nil {
		t.Fatal(err)
	}
	tgARN := tg.TargetGroups[0].TargetGroupArn
	tga, err := c.elb.DescribeTargetGroupAttributes(ctx, &elbv2.DescribeTargetGroupAttributesInput{TargetGroupArn: tgARN})
	if err != nil || attr(tga.Attributes, "preserve_client_ip.enabled") != "true" || attr(tga.Attributes, "proxy_protocol_v2.enabled") != "false" {
		t.Fatalf("target group attributes %+v, %v; want client IP preserved, no proxy protocol (instance targets' defaults)", tga, err)
	}
	mod, err := c.elb.ModifyTargetGroupAttributes(ctx, &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: tgARN,
		Attributes: []elbtypes.TargetGroupAttribute{{Key: awssdk.String("proxy_protocol_v2.enabled"), Value: awssdk.String("true")}}})
	if err != nil || attr(mod.Attributes, "proxy_protocol_v2.enabled") != "true" {
		t.Errorf("after enabling proxy protocol: %+v, %v", mod, err)
	}
	if _, err := c.elb.ModifyTargetGroupAttributes(ctx, &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: tgARN,
		Attributes: []elbtypes.TargetGroupAttribute{{Key: awssdk.String("deregistration_delay.timeout_seconds"), Value: awssdk.String("3601")}}}); errorCode(err) != "ValidationError" {
		t.Errorf("deregistration delay 3601: %v; want ValidationError", err)
	}
}

func attr[A elbtypes.LoadBalancerAttribute | elbtypes.TargetGroupAttribute](as []A, key string) string {
	for _, a := range as {
		var k, v *string
		switch x := any(a).(type) {
		case elbtypes.LoadBalancerAttribute:
			k, v = x.Key, x.Value
		case elbtypes.TargetGroupAttribute:
			k, v = x.Key, x.Value
		}
		if awssdk.ToString(k) == key {
			return awssdk.ToString(v)
		}
	}
	return "<absent>"
}

// TestHealthCheckSettings: a network load balancer's target group takes
// TCP, HTTP and HTTPS checks within AWS's ranges; the timeout defaults to
// 10 s (6 s for HTTP) and HTTP(S) checks to path /.
func TestHealthCheckSettings(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	create := func(name string, in elbv2.CreateTargetGroupInput) (elbtypes.TargetGroup, error) {
		in.Name, in.Protocol, in.Port, in.VpcId = awssdk.String(name), elbtypes.ProtocolEnumTcp, awssdk.Int32(30080), awssdk.String("vpc-1")
		out, err := c.elb.CreateTargetGroup(ctx, &in)
		if err != nil {
			return elbtypes.TargetGroup{}, err
		}
		return out.TargetGroups[0], nil
	}
	for _, tc := range []struct {
		name         string
		in           elbv2.CreateTargetGroupInput
		timeout      int32
		path, errorC string
	}{
		{name: "tcp", timeout: 10},
		{name: "http", in: elbv2.CreateTargetGroupInput{HealthCheckProtocol: elbtypes.ProtocolEnumHttp}, timeout: 6, path: "/"},
		{name: "https", in: elbv2.CreateTargetGroupInput{HealthCheckProtocol: elbtypes.ProtocolEnumHttps, HealthCheckTimeoutSeconds: awssdk.Int32(20)}, timeout: 20, path: "/"},
		{name: "udp", in: elbv2.CreateTargetGroupInput{HealthCheckProtocol: elbtypes.ProtocolEnumUdp}, errorC: "ValidationError"},
		{name: "timeout-1", in: elbv2.CreateTargetGroupInput{HealthCheckTimeoutSeconds: awssdk.Int32(1)}, errorC: "ValidationError"},
		{name: "interval-301", in: elbv2.CreateTargetGroupInput{HealthCheckIntervalSeconds: awssdk.Int32(301)}, errorC: "ValidationError"},
		{name: "healthy-11", in: elbv2.CreateTargetGroupInput{HealthyThresholdCount: awssdk.Int32(11)}, errorC: "ValidationError"},
	} {
		tg, err := create(tc.name, tc.in)
		if tc.errorC != "" {
			if errorCode(err) != tc.errorC {
				t.Errorf("%s: %v; want %s", tc.name, err, tc.errorC)
			}
			continue
		}
		if err != nil || awssdk.ToInt32(tg.HealthCheckTimeoutSeconds) != tc.timeout || awssdk.ToString(tg.HealthCheckPath) != tc.path {
			t.Errorf("%s: timeout %d path %q (%v); want %d and %q", tc.name, awssdk.ToInt32(tg.HealthCheckTimeoutSeconds), awssdk.ToString(tg.HealthCheckPath), err, tc.timeout, tc.path)
		}
	}
}

// TestSecurityGroupSourceRules: a rule's source may be another security
// group (UserIdGroupPairs); the ip-permission.group-id filter finds the
// groups whose rules name it, and a group named by another's rule cannot
// be deleted until the rule is revoked.
func TestSecurityGroupSourceRules(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	mk := func(name string) *string { return newSecurityGroup(ctx, t, c, name) }
	lb, nodes := mk("lb"), mk("nodes")
	perm := []ec2types.IpPermission{{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(30080), ToPort: awssdk.Int32(30080),
		UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: lb}}}}
	if _, err := c.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: nodes, IpPermissions: perm}); err != nil {
		t.Fatal(err)
	}
	out, err := c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: awssdk.String("ip-permission.group-id"), Values: []string{*lb}}}})
	if err != nil || len(out.SecurityGroups) != 1 || awssdk.ToString(out.SecurityGroups[0].GroupId) != *nodes ||
		len(out.SecurityGroups[0].IpPermissions) != 1 || awssdk.ToString(out.SecurityGroups[0].IpPermissions[0].UserIdGroupPairs[0].GroupId) != *lb {
		t.Fatalf("groups whose rules name %s: %+v, %v; want %s with the rule", *lb, out, err, *nodes)
	}
	if _, err := c.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: lb}); errorCode(err) != "DependencyViolation" {
		t.Errorf("deleting a group another's rule names: %v; want DependencyViolation", err)
	}
	if _, err := c.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: nodes, IpPermissions: perm}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: lb}); err != nil {
		t.Errorf("deleting it once the rule is revoked: %v", err)
	}
}

// TestTLSListeners: a TLS listener needs one known certificate, gets AWS's
// default policy without one, refuses unknown policies and forwards to TCP
// or TLS groups; DescribeSSLPolicies knows AWS's policies.
func TestTLSListeners(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	const cert = "arn:aws:acm:eu-west-1:123456789012:certificate/11111111-1111-1111-1111-111111111111"
	c.fake.AddCertificate(cert)
	lb, err := c.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String("nlb"), Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: []string{"subnet-a"}})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := c.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String("tg"), Protocol: elbtypes.ProtocolEnumTcp, Port: awssdk.Int32(30443), VpcId: awssdk.String("vpc-1")})
	if err != nil {
		t.Fatal(err)
	}
	in := func(certs []elbtypes.Certificate, policy *string) *elbv2.CreateListenerInput {
		return &elbv2.CreateListenerInput{LoadBalancerArn: lb.LoadBalancers[0].LoadBalancerArn, Port: awssdk.Int32(443), Protocol: elbtypes.ProtocolEnumTls,
			Certificates: certs, SslPolicy: policy, DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroups[0].TargetGroupArn}}}
	}
	if _, err := c.elb.CreateListener(ctx, in(nil, nil)); errorCode(err) != "ValidationError" {
		t.Errorf("TLS without a certificate: %v; want ValidationError", err)
	}
	if _, err := c.elb.CreateListener(ctx, in([]elbtypes.Certificate{{CertificateArn: awssdk.String(cert + "0")}}, nil)); errorCode(err) != "CertificateNotFound" {
		t.Errorf("unknown certificate: %v; want CertificateNotFound", err)
	}
	if _, err := c.elb.CreateListener(ctx, in([]elbtypes.Certificate{{CertificateArn: awssdk.String(cert)}}, awssdk.String("ELBSecurityPolicy-Nope"))); errorCode(err) != "SSLPolicyNotFound" {
		t.Errorf("unknown policy: %v; want SSLPolicyNotFound", err)
	}
	out, err := c.elb.CreateListener(ctx, in([]elbtypes.Certificate{{CertificateArn: awssdk.String(cert)}}, nil))
	if err != nil || awssdk.ToString(out.Listeners[0].SslPolicy) != "ELBSecurityPolicy-2016-08" || awssdk.ToString(out.Listeners[0].Certificates[0].CertificateArn) != cert {
		t.Fatalf("TLS listener to a TCP group: %+v, %v; want the certificate and AWS's default policy", out, err)
	}
	if _, err := c.elb.DescribeSSLPolicies(ctx, &elbv2.DescribeSSLPoliciesInput{Names: []string{"ELBSecurityPolicy-TLS13-1-2-2021-06"}}); err != nil {
		t.Errorf("DescribeSSLPolicies of a predefined policy: %v", err)
	}
	if _, err := c.elb.DescribeSSLPolicies(ctx, &elbv2.DescribeSSLPoliciesInput{Names: []string{"mine"}}); errorCode(err) != "SSLPolicyNotFound" {
		t.Errorf("DescribeSSLPolicies of an unknown policy: %v; want SSLPolicyNotFound", err)
	}
}

// TestElasticIPsAndIPAddressType: Elastic IPs must be the account's, go
// only to internet-facing load balancers and only once; SetIpAddressType
// makes a load balancer dual-stack in place when its subnets have IPv6.
func TestElasticIPsAndIPAddressType(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	c.fake.AddAddress("eipalloc-1")
	create := func(name string, scheme elbtypes.LoadBalancerSchemeEnum, eip string) (*elbv2.CreateLoadBalancerOutput, error) {
		return c.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String(name), Type: elbtypes.LoadBalancerTypeEnumNetwork, Scheme: scheme,
			SubnetMappings: []elbtypes.SubnetMapping{{SubnetId: awssdk.String("subnet-a"), AllocationId: awssdk.String(eip)}}})
	}
	if _, err := create("unknown", elbtypes.LoadBalancerSchemeEnumInternetFacing, "eipalloc-2"); errorCode(err) != "AllocationIdNotFound" {
		t.Errorf("unknown allocation: %v; want AllocationIdNotFound", err)
	}
	if _, err := create("internal", elbtypes.LoadBalancerSchemeEnumInternal, "eipalloc-1"); errorCode(err) != "InvalidConfigurationRequest" {
		t.Errorf("Elastic IP on an internal load balancer: %v; want InvalidConfigurationRequest", err)
	}
	out, err := create("public", elbtypes.LoadBalancerSchemeEnumInternetFacing, "eipalloc-1")
	if err != nil || awssdk.ToString(out.LoadBalancers[0].AvailabilityZones[0].LoadBalancerAddresses[0].AllocationId) != "eipalloc-1" {
		t.Fatalf("with the account's Elastic IP: %+v, %v", out, err)
	}
	if _, err := create("again", elbtypes.LoadBalancerSchemeEnumInternetFacing, "eipalloc-1"); errorCode(err) != "InvalidConfigurationRequest" {
		t.Errorf("an Elastic IP already in use: %v; want InvalidConfigurationRequest", err)
	}
	arn := out.LoadBalancers[0].LoadBalancerArn
	if _, err := c.elb.SetIpAddressType(ctx, &elbv2.SetIpAddressTypeInput{LoadBalancerArn: arn, IpAddressType: elbtypes.IpAddressTypeDualstack}); errorCode(err) != "InvalidConfigurationRequest" {
		t.Errorf("dual-stack without IPv6 subnets: %v; want InvalidConfigurationRequest", err)
	}
	c.fake.AddSubnet(Subnet{ID: "subnet-a", VPCID: "vpc-1", Zone: "eu-west-1a", ZoneID: "euw1-az1", CIDR: "10.0.1.0/24", IPv6CIDR: "2001:db8::/64"})
	if res, err := c.elb.SetIpAddressType(ctx, &elbv2.SetIpAddressTypeInput{LoadBalancerArn: arn, IpAddressType: elbtypes.IpAddressTypeDualstack}); err != nil || res.IpAddressType != elbtypes.IpAddressTypeDualstack {
		t.Errorf("dual-stack with IPv6 subnets: %+v, %v", res, err)
	}
}

// TestDescribeInstancesFilterLimit: as EC2 does, a call holds at most 200
// filter values in all (FilterLimitExceeded beyond); instance IDs are not
// filter values, and an instance-id filter leaves unknown IDs out where
// InstanceIds refuses them.
func TestDescribeInstancesFilterLimit(t *testing.T) {
	c := newClients(t)
	var ids []string
	for i := range 201 {
		id := fmt.Sprintf("i-%017x", i+1)
		ids = append(ids, id)
		c.fake.AddInstance(Instance{ID: id, InstanceType: "m5.large", Zone: "eu-west-1a", ZoneID: "euw1-az1", VPCID: "vpc-1", State: "running"})
	}
	ctx := context.Background()
	byFilter := func(vs []string, extra ...ec2types.Filter) (*ec2.DescribeInstancesOutput, error) {
		return c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: append(extra, ec2types.Filter{Name: awssdk.String("instance-id"), Values: vs})})
	}
	if _, err := byFilter(ids); errorCode(err) != "FilterLimitExceeded" {
		t.Errorf("201 filter values: %v; want FilterLimitExceeded", err)
	}
	if _, err := byFilter(ids[:200], ec2types.Filter{Name: awssdk.String("vpc-id"), Values: []string{"vpc-1"}}); errorCode(err) != "FilterLimitExceeded" {
		t.Errorf("200 instance IDs and a VPC in filters: %v; want FilterLimitExceeded", err)
	}
	out, err := byFilter(append(ids[:199:199], "i-0000000000000ffff"))
	if err != nil || countInstances(out) != 199 {
		t.Errorf("199 known IDs and an unknown one by filter: %d instances, %v; want 199", countInstances(out), err)
	}
	out, err = c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil || countInstances(out) != 201 {
		t.Errorf("201 instance IDs: %d instances, %v; want all", countInstances(out), err)
	}
	if _, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{ids[0], "i-0000000000000ffff"}}); errorCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("an unknown instance ID: %v; want InvalidInstanceID.NotFound", err)
	}
}

func countInstances(out *ec2.DescribeInstancesOutput) int {
	if out == nil {
		return 0
	}
	n := 0
	for _, r := range out.Reservations {
		n += len(r.Instances)
	}
	return n
}

// TestRuleDescriptions: a rule's description is kept and answered (upstream
// finds the rules it added to the nodes' group by them, to revoke them with
// the NLB); as in AWS, it does not tell rules apart.
func TestRuleDescriptions(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	sg, err := c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("nodes"), Description: awssdk.String("nodes"), VpcId: awssdk.String("vpc-1")})
	if err != nil {
		t.Fatal(err)
	}
	rule := func(desc string) []ec2types.IpPermission {
		r := ec2types.IpRange{CidrIp: awssdk.String("10.0.0.0/24")}
		if desc != "" {
			r.Description = awssdk.String(desc)
		}
		return []ec2types.IpPermission{{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(30080), ToPort: awssdk.Int32(30080), IpRanges: []ec2types.IpRange{r}}}
	}
	if _, err := c.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: rule("kubernetes.io/rule/nlb/health=a1")}); err != nil {
		t.Fatal(err)
	}
	out, err := c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{awssdk.ToString(sg.GroupId)}})
	if err != nil {
		t.Fatal(err)
	}
	if ps := out.SecurityGroups[0].IpPermissions; len(ps) != 1 || len(ps[0].IpRanges) != 1 || awssdk.ToString(ps[0].IpRanges[0].Description) != "kubernetes.io/rule/nlb/health=a1" {
		t.Errorf("rules %+v; want the one with its description", ps)
	}
	if _, err := c.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: rule("another")}); errorCode(err) != "InvalidPermission.Duplicate" {
		t.Errorf("the same rule with another description: %v; want InvalidPermission.Duplicate", err)
	}
	if _, err := c.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: rule("")}); err != nil {
		t.Errorf("revoking the rule without its description: %v", err)
	}
	if rules := c.fake.SecurityGroupIngress(awssdk.ToString(sg.GroupId)); len(rules) != 0 {
		t.Errorf("rules left %v", rules)
	}
}

// newSecurityGroup creates a security group named name in vpc-1 and
// returns its ID.
func newSecurityGroup(ctx context.Context, t *testing.T, c clients, name string) *string {
	t.Helper()
	out, err := c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String(name), Description: awssdk.String(name), VpcId: awssdk.String("vpc-1")})
	if err != nil {
		t.Fatal(err)
	}
	return out.GroupId
}
