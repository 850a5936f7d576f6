package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// driftEnv is a fake with three Services' load balancers, instance targets
// in a node security group (so the backend's rules are there too).
type driftEnv struct {
	*env
	nodes   []*corev1.Node
	svcs    []*corev1.Service
	nodesSG string
}

func newDriftEnv(t *testing.T) *driftEnv {
	t.Helper()
	// Without the API budget: each drift and repair-pass case builds
	// several NLBs anew (past the default ELBv2 buckets), and under the
	// budget TestDriftRepairedAndReported alone took 99 s, not 5 s.
	e := newEnv(t, noBudget)
	d := &driftEnv{env: e, nodesSG: userSG(t, e, "nodes")}
	for i := 1; i <= 2; i++ {
		in := e.addInstance(i, func(in *awsfake.Instance) { in.SecurityGroups = []string{d.nodesSG} })
		d.nodes = append(d.nodes, newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0])))
	}
	for _, name := range []string{"web", "api", "dns"} {
		svc := newService(name)
		d.svcs = append(d.svcs, svc)
		e.ensure(t, svc, d.nodes)
	}
	return d
}

// lbOf returns the fake's view of the Service's load balancer.
func (d *driftEnv) lbOf(t *testing.T, svc *corev1.Service) awsfake.LoadBalancerView {
	t.Helper()
	for _, lb := range d.fake.LoadBalancers() {
		if lb.Name == namesFor(testCluster, svc).lb {
			return lb
		}
	}
	t.Fatalf("no load balancer for %s", svc.Name)
	return awsfake.LoadBalancerView{}
}

// tgOf returns the fake's view of the Service's port-80 target group.
func (d *driftEnv) tgOf(t *testing.T, svc *corev1.Service) awsfake.TargetGroupView {
	t.Helper()
	return d.targetGroups(t)[namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)]
}

// state is what AWS holds, to compare before the drift and after repair.
func (d *driftEnv) state(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, lb := range d.fake.LoadBalancers() {
		b.WriteString(lb.Name + " " + strings.Join(lb.Listeners, ",") + " " + strings.Join(lb.SecurityGroups, ",") + "\n")
		for _, k := range sorted(keys(lb.Attributes)) {
			b.WriteString(" " + k + "=" + lb.Attributes[k])
		}
	}
	for _, tg := range d.fake.TargetGroups() {
		fmt.Fprintf(&b, "%s %s %s:%s/%d", tg.Name, strings.Join(tg.Targets, ","), tg.HealthCheckProtocol, tg.HealthCheckPort, tg.HealthCheckInterval)
		for _, k := range sorted(keys(tg.Attributes)) {
			b.WriteString(" " + k + "=" + tg.Attributes[k])
		}
		b.WriteString("\n")
	}
	for _, sg := range d.fake.SecurityGroups() {
		b.WriteString(sg.ID + " " + strings.Join(d.fake.SecurityGroupIngress(sg.ID), ",") + "\n")
	}
	return b.String()
}

// drift is a change made behind the backend's back, through the AWS API
// as an operator (or an incident) would, to the "web" Service's load
// balancer; want is what the repair reports.
type drift struct {
	name   string
	change func(t *testing.T, d *driftEnv)
	want   func(d *driftEnv) string
	// call is the one mutating call that repairs it.
	call string
}

var drifts = []drift{
	{"listener deleted", func(t *testing.T, d *driftEnv) {
		ctx := context.Background()
		out, err := d.cloud.lb.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(d.lbOf(t, d.svcs[0]).ARN)})
		if err != nil || len(out.Listeners) != 1 {
			t.Fatalf("DescribeListeners: %v, %d listeners", err, len(out.Listeners))
		}
		if _, err := d.cloud.lb.elb.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: out.Listeners[0].ListenerArn}); err != nil {
			t.Fatal(err)
		}
	}, func(*driftEnv) string { return "listener TCP:80 created" }, "CreateListener"},
	{"target deregistered", func(t *testing.T, d *driftEnv) {
		if _, err := d.cloud.lb.elb.DeregisterTargets(context.Background(), &elbv2.DeregisterTargetsInput{TargetGroupArn: awssdk.String(d.tgOf(t, d.svcs[0]).ARN),
			Targets: []elbtypes.TargetDescription{{Id: awssdk.String(instanceID(1)), Port: awssdk.Int32(30080)}}}); err != nil {
			t.Fatal(err)
		}
	}, func(d *driftEnv) string {
		return "target " + instanceID(1) + ":30080 registered in target group " + namesFor(testCluster, d.svcs[0]).targetGroup(80, "TCP", targetInstance)
	}, "RegisterTargets"},
	{"load-balancer security-group rule revoked", func(t *testing.T, d *driftEnv) {
		if _, err := d.cloud.lb.ec2.RevokeSecurityGroupIngress(context.Background(), &ec2.RevokeSecurityGroupIngressInput{GroupId: awssdk.String(d.lbOf(t, d.svcs[0]).SecurityGroups[0]),
			IpPermissions: []ec2types.IpPermission{{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(80), ToPort: awssdk.Int32(80),
				IpRanges: []ec2types.IpRange{{CidrIp: awssdk.String("0.0.0.0/0")}}}}}); err != nil {
			t.Fatal(err)
		}
	}, func(d *driftEnv) string {
		return "security-group rule tcp/80 from 0.0.0.0/0 authorized in security group " + d.ownSG()
	}, "AuthorizeSecurityGroupIngress"},
	{"instance security-group rule revoked", func(t *testing.T, d *driftEnv) {
		if _, err := d.cloud.lb.ec2.RevokeSecurityGroupIngress(context.Background(), &ec2.RevokeSecurityGroupIngressInput{GroupId: awssdk.String(d.nodesSG),
			IpPermissions: []ec2types.IpPermission{{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(30080), ToPort: awssdk.Int32(30080),
				UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: awssdk.String(d.ownSG())}}}}}); err != nil {
			t.Fatal(err)
		}
	}, func(d *driftEnv) string {
		return "security-group rule tcp/30080 from " + d.ownSG() + " authorized in instance security group " + d.nodesSG
	}, "AuthorizeSecurityGroupIngress"},
	{"load-balancer attribute changed", func(t *testing.T, d *driftEnv) {
		if _, err := d.cloud.lb.elb.ModifyLoadBalancerAttributes(context.Background(), &elbv2.ModifyLoadBalancerAttributesInput{LoadBalancerArn: awssdk.String(d.lbOf(t, d.svcs[0]).ARN),
			Attributes: []elbtypes.LoadBalancerAttribute{{Key: awssdk.String(attrCrossZone), Value: awssdk.String("true")}}}); err != nil {
			t.Fatal(err)
		}
	}, func(*driftEnv) string { return "load-balancer attributes set: " + attrCrossZone + "=false" }, "ModifyLoadBalancerAttributes"},
	{"target-group attribute changed", func(t *testing.T, d *driftEnv) {
		if _, err := d.cloud.lb.elb.ModifyTargetGroupAttributes(context.Background(), &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: awssdk.String(d.tgOf(t, d.svcs[0]).ARN),
			Attributes: []elbtypes.TargetGroupAttribute{{Key: awssdk.String("deregistration_delay.timeout_seconds"), Value: awssdk.String("10")}}}); err != nil {
			t.Fatal(err)
		}
	}, func(d *driftEnv) string {
		return "target group " + d.webTG() + " attributes set: deregistration_delay.timeout_seconds=300"
	}, "ModifyTargetGroupAttributes"},
	{"health check changed", func(t *testing.T, d *driftEnv) {
		if _, err := d.cloud.lb.elb.ModifyTargetGroup(context.Background(), &elbv2.ModifyTargetGroupInput{TargetGroupArn: awssdk.String(d.tgOf(t, d.svcs[0]).ARN),
			HealthCheckIntervalSeconds: awssdk.Int32(10)}); err != nil {
			t.Fatal(err)
		}
	}, func(d *driftEnv) string {
		return "health check of target group " + d.webTG() + " set to TCP:traffic-port every 30s"
	}, "ModifyTargetGroup"},
	// A listener of the Service's (tagged as the backend tags its own) on
	// a port it does not have; an untagged one is a stranger, never
	// touched (TestHandMadeListenerToServiceGroupIsKept).
	{"listener of the Service's added", func(t *testing.T, d *driftEnv) {
		if _, err := d.cloud.lb.elb.CreateListener(context.Background(), &elbv2.CreateListenerInput{LoadBalancerArn: awssdk.String(d.lbOf(t, d.svcs[0]).ARN),
			Port: awssdk.Int32(8080), Protocol: elbtypes.ProtocolEnumTcp,
			DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: awssdk.String(d.tgOf(t, d.svcs[0]).ARN)}},
			Tags: []elbtypes.Tag{{Key: awssdk.String(tagClusterPrefix + testCluster), Value: awssdk.String("owned")},
				{Key: awssdk.String(tagService), Value: awssdk.String(d.svcs[0].Namespace + "/" + d.svcs[0].Name)}}}); err != nil {
			t.Fatal(err)
		}
	}, func(*driftEnv) string { return "listener TCP:8080 deleted" }, "DeleteListener"},
	{"load-balancer security-group rule added", func(t *testing.T, d *driftEnv) {
		if _, err := d.cloud.lb.ec2.AuthorizeSecurityGroupIngress(context.Background(), &ec2.AuthorizeSecurityGroupIngressInput{GroupId: awssdk.String(d.ownSG()),
			IpPermissions: []ec2types.IpPermission{{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(22), ToPort: awssdk.Int32(22),
				IpRanges: []ec2types.IpRange{{CidrIp: awssdk.String("0.0.0.0/0")}}}}}); err != nil {
			t.Fatal(err)
		}
	}, func(d *driftEnv) string {
		return "security-group rule tcp/22 from 0.0.0.0/0 revoked in security group " + d.ownSG()
	}, "RevokeSecurityGroupIngress"},
	{"load-balancer security-group rule widened to a port range", func(t *testing.T, d *driftEnv) {
		authorize(t, d, ec2types.IpPermission{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(80), ToPort: awssdk.Int32(81),
			IpRanges: []ec2types.IpRange{{CidrIp: awssdk.String("0.0.0.0/0")}}})
	}, func(d *driftEnv) string {
		return "security-group rule tcp/80-81 from 0.0.0.0/0 revoked in security group " + d.ownSG()
	}, "RevokeSecurityGroupIngress"},
	{"load-balancer security-group rule from a group", func(t *testing.T, d *driftEnv) {
		authorize(t, d, ec2types.IpPermission{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(80), ToPort: awssdk.Int32(80),
			UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: awssdk.String(d.nodesSG)}}})
	}, func(d *driftEnv) string {
		return "security-group rule tcp/80 from " + d.nodesSG + " revoked in security group " + d.ownSG()
	}, "RevokeSecurityGroupIngress"},
	{"load-balancer security-group rule from a prefix list", func(t *testing.T, d *driftEnv) {
		authorize(t, d, ec2types.IpPermission{IpProtocol: awssdk.String("-1"), FromPort: awssdk.Int32(-1), ToPort: awssdk.Int32(-1),
			PrefixListIds: []ec2types.PrefixListId{{PrefixListId: awssdk.String("pl-0123456789abcdef0")}}})
	}, func(d *driftEnv) string {
		return "security-group rule -1/-1 from pl-0123456789abcdef0 revoked in security group " + d.ownSG()
	}, "RevokeSecurityGroupIngress"},
	{"load-balancer security groups changed", func(t *testing.T, d *driftEnv) {
		if _, err := d.cloud.lb.elb.SetSecurityGroups(context.Background(), &elbv2.SetSecurityGroupsInput{LoadBalancerArn: awssdk.String(d.lbOf(t, d.svcs[0]).ARN),
			SecurityGroups: []string{d.ownSG(), d.nodesSG}}); err != nil {
			t.Fatal(err)
		}
	}, func(d *driftEnv) string { return "security groups of the load balancer set to " + d.ownSG() }, "SetSecurityGroups"},
}

// authorize adds a rule to the "web" Service's own security group behind
// the backend's back.
func authorize(t *testing.T, d *driftEnv, p ec2types.IpPermission) {
	t.Helper()
	if _, err := d.cloud.lb.ec2.AuthorizeSecurityGroupIngress(context.Background(), &ec2.AuthorizeSecurityGroupIngressInput{GroupId: awssdk.String(d.ownSG()),
		IpPermissions: []ec2types.IpPermission{p}}); err != nil {
		t.Fatal(err)
	}
}

// webTG is the name of the "web" Service's target group.
func (d *driftEnv) webTG() string {
	return namesFor(testCluster, d.svcs[0]).targetGroup(80, "TCP", targetInstance)
}

// ownSG is the backend's security group of the "web" Service.
func (d *driftEnv) ownSG() string {
	for _, sg := range d.fake.SecurityGroups() {
		if sg.Name == namesFor(testCluster, d.svcs[0]).sg {
			return sg.ID
		}
	}
	return "none"
}

// ensureAll ensures every Service under ctx and returns what each
// reported, by Service name.
func (d *driftEnv) ensureAll(ctx context.Context, t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, svc := range d.svcs {
		rctx, changes := backends.WithChangeReport(ctx)
		if _, err := d.cloud.lb.EnsureLoadBalancer(rctx, testCluster, svc, d.nodes); err != nil {
			t.Fatalf("EnsureLoadBalancer %s: %v", svc.Name, err)
		}
		if c := changes(); len(c) > 0 {
			out[svc.Name] = c
		}
	}
	return out
}

// TestDriftRepairedAndReported: a change behind the backend's back is
// undone by the next Ensure, with one mutating call, and reported in words
// that name it; the other Services report nothing. The same with the reads
// of a repair pass (BeginRepairPass) as with per-Service reads.
func TestDriftRepairedAndReported(t *testing.T) {
	for _, dr := range drifts {
		for _, pass := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pass=%t", dr.name, pass), func(t *testing.T) {
				d := newDriftEnv(t)
				before := d.state(t)
				dr.change(t, d)
				if d.state(t) == before {
					t.Fatal("the drift changed nothing in the fake")
				}
				d.fake.ResetCalls()
				got := d.ensureAll(d.begin(t, pass), t)
				if want := map[string][]string{"web": {dr.want(d)}}; !equalReports(got, want) {
					t.Errorf("reported %q, want %q", got, want)
				}
				if m := d.fake.MutatingCalls(); len(m) != 1 || m[0] != dr.call {
					t.Errorf("mutating calls %v, want [%s]", m, dr.call)
				}
				if after := d.state(t); after != before {
					t.Errorf("after repair:\n%s\nwant as before:\n%s", after, before)
				}
			})
		}
	}
}

// begin returns the ctx of a repair pass (ended with the test), or a plain
// one.
func (e *env) begin(t *testing.T, pass bool) context.Context {
	t.Helper()
	if !pass {
		return context.Background()
	}
	ctx, end, err := e.cloud.lb.BeginRepairPass(context.Background(), testCluster)
	if err != nil {
		t.Fatalf("BeginRepairPass: %v", err)
	}
	t.Cleanup(end)
	return ctx
}

// TestRepairPassNothingChanged: with nothing changed, a pass makes no
// mutating call and reports nothing; the NLBs, their tags, target groups
// and security groups are read once for all Services, the rest per load
// balancer.
func TestRepairPassNothingChanged(t *testing.T) {
	d := newDriftEnv(t)
	extra := newService("extra", withAnnotation(AnnotationExtraSecurityGroups, userSG(t, d.env, "extra")))
	d.svcs = append(d.svcs, extra)
	d.ensure(t, extra, d.nodes)
	d.fake.ResetCalls()
	perService := d.ensureAll(context.Background(), t)
	plain := d.fake.CallCounts()
	t.Logf("per-Service reads of %d Services: %v", len(d.svcs), plain)
	d.fake.ResetCalls()
	inPass := d.ensureAll(d.begin(t, true), t)
	if len(perService)+len(inPass) > 0 {
		t.Errorf("reported %q and %q, want nothing", perService, inPass)
	}
	if m := d.fake.MutatingCalls(); len(m) > 0 {
		t.Errorf("the pass made mutating calls %v", m)
	}
	got := d.fake.CallCounts()
	for op, want := range map[string]int{"DescribeLoadBalancers": 1, "DescribeTags": 1, "DescribeTargetGroups": 1, "DescribeSecurityGroups": 1,
		"DescribeListeners": 4, "DescribeLoadBalancerAttributes": 4, "DescribeTargetHealth": 4, "DescribeTargetGroupAttributes": 4} {
		if got[op] != want {
			t.Errorf("%s: %d calls in the pass, want %d (all: %v)", op, got[op], want, got)
		}
	}
	if total(got) >= total(plain) {
		t.Errorf("the pass made %d calls, per-Service reads %d", total(got), total(plain))
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestRepairPassSharesAreTakenOnce: a Service reconciled outside the pass
// while it runs (here with new source ranges), or a second time in it, is
// read from AWS, never from a snapshot its own changes made stale; a
// Service the snapshot lacks is created as usual.
func TestRepairPassSharesAreTakenOnce(t *testing.T) {
	d := newDriftEnv(t)
	ctx := d.begin(t, true)
	web := d.svcs[0].DeepCopy()
	web.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	d.svcs[0] = web
	if _, err := d.cloud.lb.EnsureLoadBalancer(context.Background(), testCluster, web, d.nodes); err != nil {
		t.Fatal(err)
	}
	d.svcs = append(d.svcs, newService("new"))
	d.fake.ResetCalls()
	got := d.ensureAll(ctx, t)
	if m := d.fake.MutatingCalls(); len(m) == 0 || m[0] != "CreateSecurityGroup" {
		t.Errorf("mutating calls %v, want only the new Service's creation", m)
	}
	if len(got) > 0 {
		t.Errorf("reported %q, want nothing", got)
	}
	if want := "tcp:80-80:203.0.113.0/24"; strings.Join(d.fake.SecurityGroupIngress(d.ownSG()), ",") != want {
		t.Errorf("web's rules %v, want %s", d.fake.SecurityGroupIngress(d.ownSG()), want)
	}
	d.fake.ResetCalls()
	d.ensureAll(ctx, t)
	if n := d.fake.Calls("DescribeLoadBalancers"); n != len(d.svcs) {
		t.Errorf("a second Ensure in the pass made %d DescribeLoadBalancers, want one per Service (%d)", n, len(d.svcs))
	}
	d.assertNoMutation(t, "a second Ensure in the pass")
}

// TestRepairPassPerBackend: a pass of one backend is not read by another
// in the same router, and leaves the first one's snapshot whole.
func TestRepairPassPerBackend(t *testing.T) {
	a, b := newDriftEnv(t), newDriftEnv(t)
	ctx := a.begin(t, true)
	b.fake.ResetCalls()
	b.ensureAll(ctx, t)
	if n := b.fake.Calls("DescribeLoadBalancers"); n != len(b.svcs) {
		t.Errorf("the other backend made %d DescribeLoadBalancers, want its per-Service %d", n, len(b.svcs))
	}
	a.fake.ResetCalls()
	a.ensureAll(ctx, t)
	if n := a.fake.Calls("DescribeLoadBalancers"); n != 0 {
		t.Errorf("the pass's backend made %d DescribeLoadBalancers after the other's Ensures, want 0", n)
	}
}

func equalReports(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, "|") != strings.Join(b[k], "|") {
			return false
		}
	}
	return true
}

// TestCreationIsNoChange: creating a load balancer from nothing reports
// nothing; a Service change on an existing one is reported.
func TestCreationIsNoChange(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	ctx, changes := backends.WithChangeReport(context.Background())
	svc := newService("web")
	if _, err := e.cloud.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if c := changes(); len(c) > 0 {
		t.Errorf("creation reported %q, want nothing", c)
	}
	ctx, changes = backends.WithChangeReport(context.Background())
	if _, err := e.cloud.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	want := "target " + instanceID(2) + ":30080 deregistered from target group " + namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	if c := changes(); len(c) != 1 || c[0] != want {
		t.Errorf("reported %q, want [%q]", c, want)
	}
}

// TestRepairPassReads: a load balancer deleted between the listing and its
// tags makes DescribeTags refuse the batch; the others are then asked one
// by one and still served from the snapshot. A pass that cannot read is an
// error, and the Ensures then read from AWS.
func TestRepairPassReads(t *testing.T) {
	d := newDriftEnv(t)
	d.fake.FailNext("DescribeTags", "LoadBalancerNotFound")
	d.fake.ResetCalls()
	ctx := d.begin(t, true)
	if n := d.fake.Calls("DescribeTags"); n != 1+len(d.svcs) {
		t.Errorf("%d DescribeTags, want the refused batch and one per load balancer (%d)", n, 1+len(d.svcs))
	}
	d.fake.ResetCalls()
	d.ensureAll(ctx, t)
	if n := d.fake.Calls("DescribeLoadBalancers"); n != 0 {
		t.Errorf("%d DescribeLoadBalancers in the pass, want 0", n)
	}
	d.fake.SetOutage(true)
	_, end, err := d.cloud.lb.BeginRepairPass(context.Background(), testCluster)
	d.fake.SetOutage(false)
	end()
	if err == nil {
		t.Fatal("BeginRepairPass in an outage: no error")
	}
	d.fake.ResetCalls()
	d.ensureAll(context.Background(), t)
	if n := d.fake.Calls("DescribeLoadBalancers"); n != len(d.svcs) {
		t.Errorf("%d DescribeLoadBalancers without a pass, want %d", n, len(d.svcs))
	}
}

// TestRepairPassUpdate: UpdateLoadBalancer under a pass reads from the
// snapshot too, repairs and reports.
func TestRepairPassUpdate(t *testing.T) {
	d := newDriftEnv(t)
	drifts[1].change(t, d)
	ctx, changes := backends.WithChangeReport(d.begin(t, true))
	d.fake.ResetCalls()
	if err := d.cloud.lb.UpdateLoadBalancer(ctx, testCluster, d.svcs[0], d.nodes); err != nil {
		t.Fatal(err)
	}
	if c := changes(); len(c) != 1 || c[0] != drifts[1].want(d) {
		t.Errorf("reported %q, want [%q]", c, drifts[1].want(d))
	}
	if n := d.fake.Calls("DescribeLoadBalancers"); n != 0 {
		t.Errorf("%d DescribeLoadBalancers, want 0", n)
	}
}

// TestRepairPassConcurrent: Ensures of a pass run in parallel (the
// controller's workers), beside Ensures outside it, without a race and
// without a mutating call.
func TestRepairPassConcurrent(t *testing.T) {
	d := newDriftEnv(t)
	for i := range 5 {
		svc := newService(fmt.Sprintf("more-%d", i))
		d.svcs = append(d.svcs, svc)
		d.ensure(t, svc, d.nodes)
	}
	ctx := d.begin(t, true)
	d.fake.ResetCalls()
	var g errgroup.Group
	for i, svc := range d.svcs {
		g.Go(func() error {
			c := ctx
			if i%3 == 0 {
				c = context.Background()
			}
			_, err := d.cloud.lb.EnsureLoadBalancer(c, testCluster, svc, d.nodes)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	d.assertNoMutation(t, "a pass with nothing changed")
}
