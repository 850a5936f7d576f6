package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// upstreamNLB makes, through the ELBv2 API, what the upstream AWS provider
// leaves for a Service: an NLB named "a"+UID without security groups, a
// target group with its naming and health-check settings, a listener, all
// tagged with the Service and the cluster. It returns the NLB's DNS name.
func upstreamNLB(t *testing.T, e *env, svc *corev1.Service, targets ...string) string {
	t.Helper()
	return upstreamNLBWithGroups(t, e, svc, nil, targets...)
}

// upstreamNLBWithGroups is upstreamNLB with security groups on the NLB,
// as the upstream provider makes it with NLBSecurityGroupMode Managed.
func upstreamNLBWithGroups(t *testing.T, e *env, svc *corev1.Service, sgs []string, targets ...string) string {
	t.Helper()
	ctx := context.Background()
	tags := []elbtypes.Tag{{Key: awssdk.String(tagService), Value: awssdk.String(svc.Namespace + "/" + svc.Name)},
		{Key: awssdk.String(tagClusterPrefix + testCluster), Value: awssdk.String("owned")}}
	lb, err := e.cloud.lb.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String(cloudprovider.DefaultLoadBalancerName(svc)),
		Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: []string{"subnet-0a", "subnet-0b"}, SecurityGroups: sgs, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	lbARN := lb.LoadBalancers[0].LoadBalancerArn
	tg, err := e.cloud.lb.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String("k8s-default-web-0a1b2c3d4e"), Protocol: elbtypes.ProtocolEnumTcp,
		Port: awssdk.Int32(30080), VpcId: awssdk.String(testVPC), TargetType: elbtypes.TargetTypeEnumInstance, HealthCheckProtocol: elbtypes.ProtocolEnumTcp,
		HealthCheckPort: awssdk.String("traffic-port"), HealthCheckIntervalSeconds: awssdk.Int32(30), HealthyThresholdCount: awssdk.Int32(3), UnhealthyThresholdCount: awssdk.Int32(3), Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	tgARN := tg.TargetGroups[0].TargetGroupArn
	var ts []elbtypes.TargetDescription
	for _, id := range targets {
		ts = append(ts, elbtypes.TargetDescription{Id: awssdk.String(id), Port: awssdk.Int32(30080)})
	}
	if _, err := e.cloud.lb.elb.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tgARN, Targets: ts}); err != nil {
		t.Fatal(err)
	}
	// cloud-provider-aws (since v1.23, createListenerV2) tags its
	// listeners as its NLB.
	if _, err := e.cloud.lb.elb.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lbARN, Port: awssdk.Int32(80), Protocol: elbtypes.ProtocolEnumTcp,
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tgARN}}, Tags: tags}); err != nil {
		t.Fatal(err)
	}
	return awssdk.ToString(lb.LoadBalancers[0].DNSName)
}

// TestAdoptUpstreamNLB: a Service whose NLB the upstream AWS provider made
// (its status already shows that NLB, its finalizer is set) is adopted by
// the upstream service controller driving this backend: the same NLB and
// DNS name, no NLB, security group, target group or listener created or
// deleted, the listener untouched: the upstream target group keeps serving
// and is converged in place (its health check, the nodes as targets).
// Deleting the Service then leaves nothing behind.
//
// The steps follow what the controller has done, not time: the nodes are
// created once the Service's first sync (without nodes: it deregisters
// upstream's targets) has recorded EnsuredLoadBalancer, so the node sync
// that registers them again is the last sync, and runs alone. (Nodes
// created while that first sync could still run made upstream's service
// and node workers reconcile the Service at once with different nodes, as
// upstream does not keep them apart: under load the first sync's
// deregistration could land after the node sync's registration and after
// the quiet period the test then waited for, and the resync found the
// targets draining and registered them. Nodes there from the start would
// run both workers together too, and -race reports upstream's data race
// between them.)
func TestAdoptUpstreamNLB(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	dns := upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	upstreamTG := e.targetGroups(t)["k8s-default-web-0a1b2c3d4e"].ARN
	svc.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: dns}}
	client := testutil.NewClientset(svc)
	e.fake.ResetCalls()
	runServiceController(t, e.cloud, client)
	a := &annotated{t: t, e: e, client: client, svc: svc}
	a.event(corev1.EventTypeNormal, "EnsuredLoadBalancer")
	createNodes(t, client, nodes...)
	eventually(t, "the upstream target group converged in place: the backend's health check, the nodes as targets", func() error {
		tg, err := onlyTG(e)
		if err != nil {
			return err
		}
		if tg.ARN != upstreamTG || len(tg.Targets) != 2 {
			return fmt.Errorf("target group %s with targets %v", tg.Name, tg.Targets)
		}
		return healthCheckIs("TCP traffic-port  30/10 3/3")(e)
	})
	if got := strings.Join(e.onlyLB(t).Listeners, ","); got != "TCP:80->k8s-default-web-0a1b2c3d4e" {
		t.Errorf("listeners %s, want upstream's, untouched", got)
	}
	if lb := e.onlyLB(t); lb.DNSName != dns || len(lb.SecurityGroups) != 0 {
		t.Errorf("NLB %s with security groups %v; want the upstream one, %s, untouched", lb.DNSName, lb.SecurityGroups, dns)
	}
	for _, op := range []string{"CreateLoadBalancer", "DeleteLoadBalancer", "CreateSecurityGroup", "CreateTargetGroup", "DeleteTargetGroup",
		"CreateListener", "ModifyListener", "DeleteListener", "ModifyTargetGroup"} {
		if n := e.fake.Calls(op); n != 0 {
			t.Errorf("%s calls = %d, want 0", op, n)
		}
	}
	s, err := client.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil || len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].Hostname != dns {
		t.Errorf("status %v (%v), want the upstream NLB's %s", s.Status.LoadBalancer, err, dns)
	}
	a.resyncChangesNothing()

	deleteService(t, client, "web")
	eventually(t, "nothing left in AWS", func() error {
		if n := e.fake.ResourceCount(); n != 0 {
			return fmt.Errorf("%d resources left", n)
		}
		return nil
	})
}

// TestAdoptedGroupOfAnotherTargetTypeIsReplaced: an upstream target group
// that does not fit the Service (instance targets where it asks for ip)
// is replaced on the same NLB, announced by a Normal event first; the
// upstream group is deleted.
func TestAdoptedGroupOfAnotherTargetTypeIsReplaced(t *testing.T) {
	e := newEnv(t)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetIP))
	dns := upstreamNLB(t, e, svc, e.addInstance(1).ID)
	svc.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: dns}}
	client := testutil.NewClientset(svc)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	e.cloud.Initialize(testutil.NewClientBuilder(client), stop)
	e.fake.ResetCalls()
	runServiceController(t, e.cloud, client)
	ours := namesFor(testCluster, svc).targetGroup(80, "TCP", targetIP)
	eventually(t, "the listener forwards to the backend's ip target group; the upstream one is gone", func() error { return listenersAre("TCP:80->" + ours)(e) })
	a := &annotated{t: t, e: e, client: client, svc: svc}
	a.event(corev1.EventTypeNormal, reasonTargetGroupsReplacing, "port 80 from k8s-default-web-0a1b2c3d4e to "+ours)
	if lb := e.onlyLB(t); lb.DNSName != dns || e.fake.Calls("CreateLoadBalancer")+e.fake.Calls("DeleteLoadBalancer") != 0 {
		t.Errorf("NLB %s, %v; want the upstream one kept", lb.DNSName, e.fake.CallCounts())
	}
}

// TestAdoptedDeleteTakesUpstreamTargetGroups: a Service deleted before
// the backend ever reconciled its upstream NLB leaves nothing behind: the
// upstream provider's target groups go with the NLB.
func TestAdoptedDeleteTakesUpstreamTargetGroups(t *testing.T) {
	e := newEnv(t)
	svc := newService("web")
	upstreamNLB(t, e, svc, e.addInstance(1).ID)
	lb, _ := e.cloud.LoadBalancer()
	if _, exists, err := lb.GetLoadBalancer(context.Background(), testCluster, svc); err != nil || !exists {
		t.Fatalf("GetLoadBalancer = %v, %v; want the upstream NLB found", exists, err)
	}
	if err := lb.EnsureLoadBalancerDeleted(context.Background(), testCluster, svc); err != nil {
		t.Fatal(err)
	}
	if n := e.fake.ResourceCount(); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

// TestUpstreamNameOfAnotherClusterIsNotAdopted: an NLB with the upstream
// name but another cluster's tag is not this Service's: the backend makes
// its own and leaves that one alone.
func TestUpstreamNameOfAnotherClusterIsNotAdopted(t *testing.T) {
	e := newEnv(t)
	svc := newService("web")
	ctx := context.Background()
	if _, err := e.cloud.lb.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String(cloudprovider.DefaultLoadBalancerName(svc)),
		Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: []string{"subnet-0a"},
		Tags: []elbtypes.Tag{{Key: awssdk.String(tagService), Value: awssdk.String("default/web")}, {Key: awssdk.String(tagClusterPrefix + "other"), Value: awssdk.String("owned")}}}); err != nil {
		t.Fatal(err)
	}
	e.ensure(t, svc, nil)
	if n := len(e.fake.LoadBalancers()); n != 2 {
		t.Fatalf("%d load balancers, want the other cluster's and ours", n)
	}
	lb, _ := e.cloud.LoadBalancer()
	if err := lb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatal(err)
	}
	if lbs := e.fake.LoadBalancers(); len(lbs) != 1 || lbs[0].Name != cloudprovider.DefaultLoadBalancerName(svc) {
		t.Errorf("load balancers %+v, want only the other cluster's", lbs)
	}
}

// upstreamManagedSG creates the security group the upstream provider makes
// for the Service's NLB with NLBSecurityGroupMode Managed: its name and
// description, tagged as the cluster's (owned), allowing the listener port
// from everywhere.
func upstreamManagedSG(t *testing.T, e *env, svc *corev1.Service) string {
	t.Helper()
	ctx := context.Background()
	out, err := e.cloud.lb.ec2.(dryRunEC2).EC2API.(*ec2.Client).CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String(upstreamSGName(testCluster, svc)),
		Description: awssdk.String("[k8s] Managed SecurityGroup for LoadBalancer"), VpcId: awssdk.String(testVPC),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup,
			Tags: []ec2types.Tag{{Key: awssdk.String(tagClusterPrefix + testCluster), Value: awssdk.String("owned")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.lb.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: out.GroupId, IpPermissions: []ec2types.IpPermission{
		{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(80), ToPort: awssdk.Int32(80), IpRanges: []ec2types.IpRange{{CidrIp: awssdk.String("0.0.0.0/0")}}}}}); err != nil {
		t.Fatal(err)
	}
	return awssdk.ToString(out.GroupId)
}

// TestAdoptUpstreamNLBWithSecurityGroups: an NLB the upstream provider
// made with security groups (NLBSecurityGroupMode Managed) is adopted in
// place, through the upstream service controller: no NLB created or
// deleted, the same DNS name; the NLB gets the backend's own group
// (allowing the Service's sources) in one SetSecurityGroups; the upstream
// provider's group is deleted — at once, or with the Service when AWS
// refuses at first — and a group of someone else's that was on the NLB is
// only detached, never deleted.
func TestAdoptUpstreamNLBWithSecurityGroups(t *testing.T) {
	for _, refused := range []bool{false, true} {
		t.Run(fmt.Sprintf("delete refused at first %v", refused), func(t *testing.T) {
			e := newEnv(t)
			svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
			theirs, someones := upstreamManagedSG(t, e, svc), userSG(t, e, "by-hand")
			dns := upstreamNLBWithGroups(t, e, svc, []string{theirs, someones}, e.addInstance(1).ID)
			svc.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: dns}}
			client := testutil.NewClientset(svc)
			e.fake.ResetCalls()
			if refused {
				e.fake.FailNext("DeleteSecurityGroup", "DependencyViolation")
			}
			runServiceController(t, e.cloud, client)
			a := &annotated{t: t, e: e, client: client, svc: svc}
			eventually(t, "the NLB has the backend's group only", func() error { return nlbGroups("ours")(e) })
			eventually(t, "the upstream target group converged in place", func() error {
				if tg, err := onlyTG(e); err != nil || len(tg.Targets) != 0 {
					return fmt.Errorf("target group %v (%w)", tg, err)
				}
				return listenersAre("TCP:80->k8s-default-web-0a1b2c3d4e")(e)
			})
			eventually(t, "the backend's group allows the listener", func() error {
				for _, sg := range e.fake.SecurityGroups() {
					if sg.Tags[tagService] != "" && sg.ID != theirs {
						if got := strings.Join(e.fake.SecurityGroupIngress(sg.ID), ","); got != "tcp:80-80:0.0.0.0/0" {
							return fmt.Errorf("the backend's group allows %s", got)
						}
					}
				}
				return nil
			})
			left := func() []string {
				var ids []string
				for _, sg := range e.fake.SecurityGroups() {
					ids = append(ids, sg.ID)
				}
				return ids
			}
			if has := slices.Contains(left(), theirs); has != refused {
				t.Errorf("the upstream provider's group there: %v, want %v", has, refused)
			}
			if !slices.Contains(left(), someones) {
				t.Errorf("the group of someone else's was deleted")
			}
			lb := e.onlyLB(t)
			if lb.DNSName != dns {
				t.Errorf("DNS name %s, want %s", lb.DNSName, dns)
			}
			for _, op := range []string{"CreateLoadBalancer", "DeleteLoadBalancer"} {
				if n := e.fake.Calls(op); n != 0 {
					t.Errorf("%s calls = %d, want 0", op, n)
				}
			}
			if n := e.fake.Calls("SetSecurityGroups"); n != 1 {
				t.Errorf("SetSecurityGroups calls = %d, want 1", n)
			}
			a.resyncChangesNothing()

			deleteService(t, client, "web")
			eventually(t, "nothing of the Service's left; the group of someone else's kept", func() error {
				if got := left(); len(got) != 1 || got[0] != someones {
					return fmt.Errorf("security groups %v, want only %s", got, someones)
				}
				if n := len(e.fake.LoadBalancers()); n != 0 {
					return fmt.Errorf("%d load balancers", n)
				}
				return nil
			})
		})
	}
}

// TestAdoptedNLBInARepairPass: a drift-repair pass keeps an adopted NLB's
// upstream target group too: with nothing changed it makes no mutating
// call; a target deregistered by hand is registered again in that group,
// with one call, and reported.
func TestAdoptedNLBInARepairPass(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	e.ensure(t, svc, nodes)
	tg, err := onlyTG(e)
	if err != nil || tg.Name != "k8s-default-web-0a1b2c3d4e" {
		t.Fatalf("target group %v (%v), want upstream's kept", tg, err)
	}
	lb, _ := e.cloud.LoadBalancer()
	ensureInPass := func() []string {
		ctx, changes := backends.WithChangeReport(e.begin(t, true))
		if _, err := lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatal(err)
		}
		return changes()
	}
	e.fake.ResetCalls()
	if got := ensureInPass(); len(got) > 0 || len(e.fake.MutatingCalls()) > 0 {
		t.Errorf("a pass with nothing changed reported %q and made %v", got, e.fake.MutatingCalls())
	}
	if _, err := e.cloud.lb.elb.DeregisterTargets(context.Background(), &elbv2.DeregisterTargetsInput{TargetGroupArn: awssdk.String(tg.ARN),
		Targets: []elbtypes.TargetDescription{{Id: awssdk.String(instanceID(2)), Port: awssdk.Int32(30080)}}}); err != nil {
		t.Fatal(err)
	}
	e.fake.ResetCalls()
	got := ensureInPass()
	if m := strings.Join(e.fake.MutatingCalls(), ","); m != "RegisterTargets" || len(got) != 1 || !strings.Contains(got[0], "k8s-default-web-0a1b2c3d4e") {
		t.Errorf("repair made %s and reported %q; want one RegisterTargets in the upstream group, reported", m, got)
	}
	if tg, _ := onlyTG(e); len(tg.Targets) != 2 {
		t.Errorf("targets %v, want both instances", tg.Targets)
	}
}

// TestAdoptedDeleteRevokesUpstreamInstanceRules: the rules the upstream
// provider added to the nodes' security group for an NLB without security
// groups (client and health rules, described with the NLB's name) keep
// serving while the backend runs the adopted NLB, and are revoked when the
// Service is deleted, with the MTU rule of a client CIDR no other NLB's
// client rule has; rules for other NLBs (and the MTU rule they need),
// other rules and the group itself (shared, not the Service's) are left
// alone.
func TestAdoptedDeleteRevokesUpstreamInstanceRules(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	ctx := context.Background()
	out, err := e.cloud.lb.ec2.(dryRunEC2).EC2API.(*ec2.Client).CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("nodes"),
		Description: awssdk.String("the cluster's nodes"), VpcId: awssdk.String(testVPC),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup,
			Tags: []ec2types.Tag{{Key: awssdk.String(tagClusterPrefix + testCluster), Value: awssdk.String("shared")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	nodeSG := awssdk.ToString(out.GroupId)
	lbName := cloudprovider.DefaultLoadBalancerName(svc)
	rule := func(proto string, from, to int32, cidr, desc string) ec2types.IpPermission {
		r := ec2types.IpRange{CidrIp: awssdk.String(cidr)}
		if desc != "" {
			r.Description = awssdk.String(desc)
		}
		return ec2types.IpPermission{IpProtocol: awssdk.String(proto), FromPort: awssdk.Int32(from), ToPort: awssdk.Int32(to), IpRanges: []ec2types.IpRange{r}}
	}
	if _, err := e.cloud.lb.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: out.GroupId, IpPermissions: []ec2types.IpPermission{
		rule("tcp", 30080, 30080, "0.0.0.0/0", "kubernetes.io/rule/nlb/client="+lbName),
		rule("tcp", 30080, 30080, "10.0.0.0/16", "kubernetes.io/rule/nlb/health="+lbName),
		rule("tcp", 30080, 30080, "192.0.2.0/24", "kubernetes.io/rule/nlb/client="+lbName),
		rule("icmp", 3, 4, "0.0.0.0/0", "kubernetes.io/rule/nlb/mtu"),
		rule("icmp", 3, 4, "192.0.2.0/24", "kubernetes.io/rule/nlb/mtu"),
		rule("tcp", 30081, 30081, "0.0.0.0/0", "kubernetes.io/rule/nlb/client=aother"),
		rule("tcp", 22, 22, "10.0.0.0/8", ""),
	}}); err != nil {
		t.Fatal(err)
	}
	upstreamRules := "icmp:3-4:0.0.0.0/0,icmp:3-4:192.0.2.0/24,tcp:22-22:10.0.0.0/8,tcp:30080-30080:0.0.0.0/0,tcp:30080-30080:10.0.0.0/16,tcp:30080-30080:192.0.2.0/24,tcp:30081-30081:0.0.0.0/0"
	lb, _ := e.cloud.LoadBalancer()
	if _, err := lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.fake.SecurityGroupIngress(nodeSG), ","); got != upstreamRules {
		t.Errorf("nodes' rules while adopted %s, want upstream's kept serving: %s", got, upstreamRules)
	}
	e.fake.ResetCalls()
	if err := lb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(e.fake.SecurityGroupIngress(nodeSG), ","), "icmp:3-4:0.0.0.0/0,tcp:22-22:10.0.0.0/8,tcp:30081-30081:0.0.0.0/0"; got != want {
		t.Errorf("nodes' rules after delete %s, want %s (upstream's for %s revoked, and the MTU rule of a CIDR no client rule has left; nothing else)", got, want, lbName)
	}
	if n := e.fake.Calls("RevokeSecurityGroupIngress"); n != 1 {
		t.Errorf("RevokeSecurityGroupIngress calls = %d, want 1 (one per group)", n)
	}
	if n := e.fake.Calls("DeleteSecurityGroup"); n != 0 {
		t.Errorf("DeleteSecurityGroup calls = %d, want 0: the nodes' group is not the Service's", n)
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatalf("deleting again: %v", err)
	}
}
