package upstreamaws

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// upstreamWorkload drives upstream's provider through what the audit
// covers: the node sweep, and for every annotated Service of the adoption
// test an NLB created, ensured unchanged, changed (a port added, health
// checks and attributes retuned, TLS on the new port too), given fewer
// nodes, and deleted.
func upstreamWorkload(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	i, _ := e.cloud.InstancesV2()
	for _, n := range e.nodes() {
		if _, err := i.InstanceExists(ctx, n); err != nil {
			t.Fatal(err)
		}
		if _, err := i.InstanceShutdown(ctx, n); err != nil {
			t.Fatal(err)
		}
		if _, err := i.InstanceMetadata(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	lb, _ := e.cloud.LoadBalancer()
	for _, svc := range adoptionServices() {
		for step, change := range []func(){
			func() {},
			func() {},
			func() {
				svc.Spec.Ports = append(svc.Spec.Ports, nlbService("x", 8443).Spec.Ports[0])
				svc.Spec.Ports[len(svc.Spec.Ports)-1].Name = "extra"
				if svc.Annotations[annPrefix+"ssl-ports"] != "" {
					svc.Annotations[annPrefix+"ssl-ports"] = "443,8443"
				}
				if svc.Annotations[annPrefix+"healthcheck-interval"] != "" {
					svc.Annotations[annPrefix+"healthcheck-interval"] = "30"
					svc.Annotations[annPrefix+"target-group-attributes"] = "preserve_client_ip.enabled=true,proxy_protocol_v2.enabled=false"
					svc.Annotations[annPrefix+"cross-zone-load-balancing-enabled"] = "false"
				}
			},
		} {
			change()
			if _, err := lb.EnsureLoadBalancer(ctx, clusterID, svc, e.nodes()); err != nil {
				t.Fatalf("service %s, step %d: EnsureLoadBalancer: %v", svc.Name, step, err)
			}
		}
		if err := lb.UpdateLoadBalancer(ctx, clusterID, svc, e.nodes()[:2]); err != nil {
			t.Fatalf("service %s: UpdateLoadBalancer: %v", svc.Name, err)
		}
		if err := lb.EnsureLoadBalancerDeleted(ctx, clusterID, svc); err != nil {
			t.Fatalf("service %s: EnsureLoadBalancerDeleted: %v", svc.Name, err)
		}
	}
	if lbs, tgs := e.fake.LoadBalancers(), e.fake.TargetGroups(); len(lbs)+len(tgs) != 0 {
		t.Errorf("after the deletes: load balancers %v, target groups %v", lbs, tgs)
	}
	// Upstream finds the rules it added to the nodes' group by their
	// descriptions, and revokes them with the NLB.
	if rules := e.fake.SecurityGroupIngress(e.seeded.NodeSecurityGroup); len(rules) != 0 {
		t.Errorf("after the deletes the nodes' security group keeps rules %v", rules)
	}
}

// audited are the parameters, by action, upstream's provider sends in
// upstreamWorkload, each checked against the AWS API reference and the
// fake's handling of it (awsfake's own tests cover each): list indexes as N.
var audited = map[string]string{
	"AuthorizeSecurityGroupIngress":  "GroupId IpPermissions.N.FromPort IpPermissions.N.IpProtocol IpPermissions.N.IpRanges.N.CidrIp IpPermissions.N.IpRanges.N.Description IpPermissions.N.ToPort",
	"CreateListener":                 "Certificates.member.N.CertificateArn DefaultActions.member.N.TargetGroupArn DefaultActions.member.N.Type LoadBalancerArn Port Protocol SslPolicy Tags.member.N.Key Tags.member.N.Value",
	"CreateLoadBalancer":             "Name Scheme SecurityGroups SubnetMappings.member.N.AllocationId SubnetMappings.member.N.SubnetId Tags.member.N.Key Tags.member.N.Value Type",
	"CreateTargetGroup":              "HealthCheckIntervalSeconds HealthCheckPath HealthCheckPort HealthCheckProtocol HealthyThresholdCount Name Port Protocol Tags.member.N.Key Tags.member.N.Value TargetType UnhealthyThresholdCount VpcId",
	"DeleteLoadBalancer":             "LoadBalancerArn",
	"DeleteTargetGroup":              "TargetGroupArn",
	"DeregisterTargets":              "TargetGroupArn Targets.member.N.Id Targets.member.N.Port",
	"DescribeAvailabilityZones":      "",
	"DescribeInstanceTopology":       "InstanceId.N",
	"DescribeInstances":              "InstanceId.N MaxResults",
	"DescribeListeners":              "LoadBalancerArn",
	"DescribeLoadBalancerAttributes": "LoadBalancerArn",
	"DescribeLoadBalancers":          "LoadBalancerArns.member.N Names.member.N",
	"DescribeRouteTables":            "Filter.N.Name Filter.N.Value.N",
	"DescribeSecurityGroups":         "GroupId.N",
	"DescribeSubnets":                "Filter.N.Name Filter.N.Value.N SubnetId.N",
	"DescribeTargetGroupAttributes":  "TargetGroupArn",
	"DescribeTargetGroups":           "LoadBalancerArn TargetGroupArns.member.N",
	"DescribeTargetHealth":           "TargetGroupArn",
	"ModifyListener":                 "DefaultActions.member.N.TargetGroupArn DefaultActions.member.N.Type ListenerArn Port Protocol",
	"ModifyLoadBalancerAttributes":   "Attributes.member.N.Key Attributes.member.N.Value LoadBalancerArn",
	"ModifyTargetGroup":              "HealthCheckPath TargetGroupArn",
	"ModifyTargetGroupAttributes":    "Attributes.member.N.Key Attributes.member.N.Value TargetGroupArn",
	"RegisterTargets":                "TargetGroupArn Targets.member.N.Id Targets.member.N.Port",
	"RevokeSecurityGroupIngress":     "GroupId IpPermissions.N.FromPort IpPermissions.N.IpProtocol IpPermissions.N.IpRanges.N.CidrIp IpPermissions.N.IpRanges.N.Description IpPermissions.N.ToPort",
}

// TestUpstreamParameters: everything upstream's provider sends for the node
// sweep and the NLB lifecycle of every annotated Service is a parameter the
// fake was audited for; a new one (a new upstream version, a new
// annotation) fails here until the fake is checked for it and it is added
// to audited.
func TestUpstreamParameters(t *testing.T) {
	e := newEnv(t, 3)
	e.fake.AddCertificate(certARN)
	e.fake.AddAddress("eipalloc-0a1b2c3d4e5f60001")
	e.fake.AddAddress("eipalloc-0a1b2c3d4e5f60002")
	upstreamWorkload(t, e)
	sent := e.fake.Parameters()
	for action, ps := range sent {
		want, ok := audited[action]
		if !ok {
			t.Errorf("upstream calls %s (%s), which the fake was not audited for", action, strings.Join(ps, " "))
			continue
		}
		known := strings.Fields(want)
		for _, p := range ps {
			if !slices.Contains(known, p) {
				t.Errorf("upstream sends %s %s, which the fake was not audited for", action, p)
			}
		}
	}
	for action := range audited {
		if _, ok := sent[action]; !ok {
			t.Errorf("upstream no longer calls %s: the workload or the audit is stale", action)
		}
	}
}
