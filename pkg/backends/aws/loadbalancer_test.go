package aws

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cloud-provider/api"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// awsNodes adds n instances and returns their Nodes.
func (e *env) awsNodes(from, n int) []*corev1.Node {
	var out []*corev1.Node
	for i := from; i < from+n; i++ {
		in := e.addInstance(i)
		out = append(out, newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0])))
	}
	return out
}

// otherNodes returns n nodes of another cloud (vSphere VMs linked to the VPC).
func otherNodes(n int) []*corev1.Node {
	var out []*corev1.Node
	for i := range n {
		out = append(out, newNode("vm-"+string(rune('a'+i)), testutil.WithProviderID("vsphere://4201-"+string(rune('a'+i))), testutil.WithInternalIP("192.168.10."+string(rune('1'+i)))))
	}
	return out
}

func (e *env) ensure(t *testing.T, svc *corev1.Service, nodes []*corev1.Node) *corev1.LoadBalancerStatus {
	t.Helper()
	lb, _ := e.cloud.LoadBalancer()
	status, err := lb.EnsureLoadBalancer(context.Background(), testCluster, svc, nodes)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	return status
}

func (e *env) onlyLB(t *testing.T) awsfake.LoadBalancerView {
	t.Helper()
	lbs := e.fake.LoadBalancers()
	if len(lbs) != 1 {
		t.Fatalf("%d load balancers, want 1: %+v", len(lbs), lbs)
	}
	return lbs[0]
}

func (e *env) targetGroups(t *testing.T) map[string]awsfake.TargetGroupView {
	t.Helper()
	out := map[string]awsfake.TargetGroupView{}
	for _, tg := range e.fake.TargetGroups() {
		out[tg.Name] = tg
	}
	return out
}

func (e *env) assertNoMutation(t *testing.T, what string) {
	t.Helper()
	if m := e.fake.MutatingCalls(); len(m) > 0 {
		t.Errorf("%s made mutating calls %v, want none", what, m)
	}
}

func TestEnsureCreatesNLB(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web")
	status := e.ensure(t, svc, nodes)
	lb := e.onlyLB(t)
	n := namesFor(testCluster, svc)
	if len(status.Ingress) != 1 || status.Ingress[0].Hostname != lb.DNSName || lb.Name != n.lb || len(lb.Name) > 32 {
		t.Errorf("status %+v for load balancer %+v", status, lb)
	}
	if lb.Scheme != schemeInternetFacing || strings.Join(lb.Subnets, ",") != "subnet-0a,subnet-0b" || len(lb.SecurityGroups) != 1 {
		t.Errorf("load balancer = %+v", lb)
	}
	if lb.Tags[tagClusterPrefix+testCluster] != "owned" || lb.Tags[tagService] != "default/web" {
		t.Errorf("tags = %v", lb.Tags)
	}
	tgName := n.targetGroup(80, "TCP", targetInstance)
	if want := []string{"TCP:80->" + tgName}; strings.Join(lb.Listeners, ",") != strings.Join(want, ",") {
		t.Errorf("listeners = %v, want %v", lb.Listeners, want)
	}
	tg := e.targetGroups(t)[tgName]
	if tg.TargetType != targetInstance || tg.Port != 30080 || tg.HealthCheckProtocol != "TCP" || tg.HealthCheckPort != "traffic-port" {
		t.Errorf("target group = %+v", tg)
	}
	if want := instanceID(1) + ":30080," + instanceID(2) + ":30080"; strings.Join(tg.Targets, ",") != want {
		t.Errorf("targets = %v, want %s", tg.Targets, want)
	}
	if got := e.fake.SecurityGroupIngress(lb.SecurityGroups[0]); strings.Join(got, ",") != "tcp:80-80:0.0.0.0/0" {
		t.Errorf("ingress = %v", got)
	}

	e.fake.ResetCalls()
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	e.assertNoMutation(t, "Ensure and Update with nothing changed")
}

func TestEnsureIPTargetsForOtherClouds(t *testing.T) {
	e := newEnv(t)
	nodes := append(e.awsNodes(1, 1), otherNodes(2)...)
	svc := newService("web")
	lbi, _ := e.cloud.LoadBalancer()
	targeter := lbi.(backends.NodeTargeter)
	for _, n := range nodes {
		if !targeter.CanTarget(svc, n) {
			t.Errorf("CanTarget(%s) = false", n.Name)
		}
	}
	if targeter.CanTarget(newService("x", withAnnotation(AnnotationTargetType, "instance")), nodes[1]) {
		t.Error("CanTarget of a vSphere node for instance targets = true")
	}
	if targeter.CanTarget(svc, newNode("no-address")) {
		t.Error("CanTarget of a node without an address = true")
	}
	if targeter.CanTarget(svc, newNode("public", testutil.WithProviderID("vsphere://p"), testutil.WithInternalIP("203.0.113.7"))) {
		t.Error("CanTarget of a node with a public address = true; AWS refuses such IP targets outside the VPC")
	}
	if !targeter.CanTarget(svc, newNode("cgnat", testutil.WithProviderID("vsphere://c"), testutil.WithInternalIP("100.64.3.4"))) {
		t.Error("CanTarget of a node in 100.64.0.0/10 = false")
	}
	e.ensure(t, svc, nodes)
	tg := e.targetGroups(t)[namesFor(testCluster, svc).targetGroup(80, "TCP", targetIP)]
	want := "10.0.11.11:30080,192.168.10.1:30080@all,192.168.10.2:30080@all"
	if tg.TargetType != targetIP || strings.Join(tg.Targets, ",") != want {
		t.Errorf("target group %+v, want ip targets %s", tg, want)
	}
}

// TestIPTargetsKeptWhenLastNonEC2NodeLeaves is issue 42's defect 4: an NLB
// without the target-type annotation has IP targets while a node of
// another cloud is among its nodes; when that node leaves, the EC2
// instances stay IP targets (one DeregisterTargets, through the node
// sync's UpdateLoadBalancer), also for a backend started afresh (the
// choice read back from the NLB's target groups), and when the node comes
// back it is one RegisterTargets. Before, the leave replaced the target
// group with one of instance targets (the listener moved, the old group
// deleted) and the return replaced it again. The annotation still moves
// the Service to instance targets.
func TestIPTargetsKeptWhenLastNonEC2NodeLeaves(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ec2, other := e.awsNodes(1, 2), otherNodes(1)
	svc := newService("web")
	e.ensure(t, svc, append(ec2, other...))
	ipGroup := func(t *testing.T, what string) {
		t.Helper()
		tgs := e.fake.TargetGroups()
		if len(tgs) != 1 || tgs[0].TargetType != targetIP || len(tgs[0].Targets) != 2 {
			t.Fatalf("%s: target groups %+v, want one of IP targets with the 2 instances", what, tgs)
		}
	}
	mutations := func(t *testing.T, what, want string) {
		t.Helper()
		if m := strings.Join(e.fake.MutatingCalls(), ","); m != want {
			t.Errorf("%s: mutating calls %q, want %q", what, m, want)
		}
	}
	lbi, _ := e.cloud.LoadBalancer()
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, ec2); err != nil {
		t.Fatal(err)
	}
	mutations(t, "the other cloud's node left", "DeregisterTargets")
	ipGroup(t, "the other cloud's node left")
	e.ensure(t, svc, ec2)

	e.cloud = buildCloud(t, e.url) // a restart: nothing remembered
	lbi, _ = e.cloud.LoadBalancer()
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, ec2); err != nil {
		t.Fatal(err)
	}
	e.ensure(t, svc, ec2)
	mutations(t, "Update and Ensure after a restart", "")
	ipGroup(t, "after a restart")

	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, append(ec2, other...)); err != nil {
		t.Fatal(err)
	}
	mutations(t, "the other cloud's node back", "RegisterTargets")

	e.ensure(t, newService("web", withAnnotation(AnnotationTargetType, targetInstance)), ec2)
	if tgs := e.fake.TargetGroups(); len(tgs) != 1 || tgs[0].TargetType != targetInstance {
		t.Errorf("with the annotation instance: target groups %+v, want one of instance targets", tgs)
	}

	// IP targets chosen only because no node had a providerID yet are not
	// kept: once the nodes are initialised, instance targets.
	early := newService("early")
	uninitialised := make([]*corev1.Node, len(ec2))
	for i, n := range ec2 {
		uninitialised[i] = n.DeepCopy()
		uninitialised[i].Spec.ProviderID = ""
	}
	e.ensure(t, early, uninitialised)
	e.ensure(t, early, ec2)
	if tg, ok := e.targetGroups(t)[namesFor(testCluster, early).targetGroup(80, "TCP", targetInstance)]; !ok || tg.TargetType != targetInstance {
		t.Errorf("a Service first ensured before its nodes had providerIDs, then with them: no instance target group (%+v)", e.fake.TargetGroups())
	}
}

func TestUpdates(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web")
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	n := namesFor(testCluster, svc)
	ctx := context.Background()
	var removed *corev1.Node

	t.Run("node added", func(t *testing.T) {
		e.fake.ResetCalls()
		nodes = append(nodes, e.awsNodes(3, 1)...)
		if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatal(err)
		}
		if m := e.fake.MutatingCalls(); strings.Join(m, ",") != "RegisterTargets" {
			t.Errorf("mutating calls = %v, want RegisterTargets", m)
		}
		if got := e.targetGroups(t)[n.targetGroup(80, "TCP", targetInstance)].Targets; len(got) != 3 {
			t.Errorf("targets = %v", got)
		}
	})
	t.Run("node removed", func(t *testing.T) {
		e.fake.ResetCalls()
		removed = nodes[0]
		nodes = nodes[1:]
		if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatal(err)
		}
		if m := e.fake.MutatingCalls(); strings.Join(m, ",") != "DeregisterTargets" {
			t.Errorf("mutating calls = %v, want DeregisterTargets", m)
		}
		tg := e.targetGroups(t)[n.targetGroup(80, "TCP", targetInstance)]
		if len(tg.Targets) != 2 || len(tg.Draining) != 1 {
			t.Errorf("targets %v, draining %v; want 2 and 1", tg.Targets, tg.Draining)
		}
		e.fake.ResetCalls()
		if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatal(err)
		}
		e.assertNoMutation(t, "Update while the removed node's target drains")
	})
	t.Run("node back while its target drains", func(t *testing.T) {
		e.fake.ResetCalls()
		if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, append(nodes, removed)); err != nil {
			t.Fatal(err)
		}
		if m := e.fake.MutatingCalls(); strings.Join(m, ",") != "RegisterTargets" {
			t.Errorf("mutating calls = %v, want RegisterTargets", m)
		}
		if tg := e.targetGroups(t)[n.targetGroup(80, "TCP", targetInstance)]; len(tg.Targets) != 3 || len(tg.Draining) != 0 {
			t.Errorf("targets %v, draining %v; want 3 and 0", tg.Targets, tg.Draining)
		}
		if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("port added, TCP and UDP on one port", func(t *testing.T) {
		svc = newService("web", withPort("dns", corev1.ProtocolTCP, 53, 30053), withPort("dns-udp", corev1.ProtocolUDP, 53, 30053))
		e.ensure(t, svc, nodes)
		lb := e.onlyLB(t)
		want := []string{"TCP:80->" + n.targetGroup(80, "TCP", targetInstance), "TCP_UDP:53->" + n.targetGroup(53, "TCP_UDP", targetInstance)}
		if strings.Join(lb.Listeners, ",") != strings.Join(want, ",") {
			t.Errorf("listeners = %v, want %v", lb.Listeners, want)
		}
		if got := e.fake.SecurityGroupIngress(lb.SecurityGroups[0]); strings.Join(got, ",") != "tcp:53-53:0.0.0.0/0,tcp:80-80:0.0.0.0/0,udp:53-53:0.0.0.0/0" {
			t.Errorf("ingress = %v", got)
		}
	})
	t.Run("port removed", func(t *testing.T) {
		svc = newService("web")
		e.ensure(t, svc, nodes)
		if lb := e.onlyLB(t); len(lb.Listeners) != 1 || len(e.fake.TargetGroups()) != 1 {
			t.Errorf("listeners %v, target groups %v", lb.Listeners, e.fake.TargetGroups())
		}
	})
	t.Run("source ranges and local traffic", func(t *testing.T) {
		svc = newService("web", testutil.WithSourceRanges("203.0.113.0/24", "198.51.100.0/24"), testutil.WithLocalTraffic(31999))
		e.ensure(t, svc, nodes)
		lb := e.onlyLB(t)
		if got := e.fake.SecurityGroupIngress(lb.SecurityGroups[0]); strings.Join(got, ",") != "tcp:80-80:198.51.100.0/24,tcp:80-80:203.0.113.0/24" {
			t.Errorf("ingress = %v", got)
		}
		tg := e.targetGroups(t)[n.targetGroup(80, "TCP", targetInstance)]
		if tg.HealthCheckProtocol != "HTTP" || tg.HealthCheckPort != "31999" || tg.HealthCheckPath != "/healthz" {
			t.Errorf("health check = %s %s %s", tg.HealthCheckProtocol, tg.HealthCheckPort, tg.HealthCheckPath)
		}
		e.fake.ResetCalls()
		e.ensure(t, svc, nodes)
		e.assertNoMutation(t, "Ensure after the change")
	})
	t.Run("annotation: target type ip", func(t *testing.T) {
		svc = newService("web", withAnnotation(AnnotationTargetType, "ip"))
		e.ensure(t, svc, nodes)
		tgs := e.fake.TargetGroups()
		if len(tgs) != 1 || tgs[0].TargetType != targetIP || len(tgs[0].Targets) != 2 || strings.Contains(strings.Join(tgs[0].Targets, ","), "@all") {
			t.Errorf("target groups = %+v", tgs)
		}
	})
	t.Run("annotation: internal scheme replaces the NLB", func(t *testing.T) {
		before := e.onlyLB(t)
		svc = newService("web", withAnnotation(AnnotationInternal, "true"))
		status := e.ensure(t, svc, nodes)
		lb := e.onlyLB(t)
		if lb.Scheme != schemeInternal || lb.ARN == before.ARN || strings.Join(lb.Subnets, ",") != "subnet-1a,subnet-1b" || status.Ingress[0].Hostname != lb.DNSName {
			t.Errorf("load balancer = %+v", lb)
		}
		if len(lb.Listeners) != 1 || e.fake.SecurityGroupCount() != 1 {
			t.Errorf("listeners %v, %d security groups", lb.Listeners, e.fake.SecurityGroupCount())
		}
		// The replaced NLB's ip target group is not left behind.
		if tgs := e.fake.TargetGroups(); len(tgs) != 1 || tgs[0].TargetType != targetInstance {
			t.Errorf("target groups after the replacement = %+v, want the one instance group", tgs)
		}
	})
	t.Run("annotation: subnets by Name tag", func(t *testing.T) {
		svc = newService("web", withAnnotation(AnnotationSubnets, "public-a"))
		e.ensure(t, svc, nodes)
		if lb := e.onlyLB(t); strings.Join(lb.Subnets, ",") != "subnet-0a" {
			t.Errorf("subnets = %v", lb.Subnets)
		}
	})
}

func TestBadInputChangesNothing(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 1)
	lbi, _ := e.cloud.LoadBalancer()
	for _, tc := range []struct {
		name, want string
		svc        *corev1.Service
	}{
		{"scheme", string(AnnotationScheme), newService("a", withAnnotation(AnnotationScheme, "public"))},
		{"internal", string(AnnotationInternal), newService("a", withAnnotation(AnnotationInternal, "maybe"))},
		{"target type", string(AnnotationTargetType), newService("a", withAnnotation(AnnotationTargetType, "lambda"))},
		{"unknown subnet", "subnet-0ff", newService("a", withAnnotation(AnnotationSubnets, "subnet-0ff"))},
		{"two subnets in a zone", "both in zone", newService("a", withAnnotation(AnnotationSubnets, "subnet-0a,subnet-1a"))},
		{"SCTP", "SCTP", newService("a", withPort("s", corev1.ProtocolSCTP, 9, 30009))},
		{"TCP and UDP on different node ports", "same nodePort", newService("a", withPort("u", corev1.ProtocolUDP, 80, 30081))},
		{"bad source range", "loadBalancerSourceRanges", newService("a", testutil.WithSourceRanges("nonsense"))},
		{"IPv6 source range", "not an IPv4 CIDR", newService("a", testutil.WithSourceRanges("2001:db8::/32"))},
		{"bad source-range annotation", "load-balancer-source-ranges", newService("a", withAnnotation("service.beta.kubernetes.io/load-balancer-source-ranges", "10.0.0.0/33"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.fake.ResetCalls()
			_, err := lbi.EnsureLoadBalancer(context.Background(), testCluster, tc.svc, nodes)
			if _, ok := backends.AsUserError(err); !ok || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want a user error naming %q", err, tc.want)
			}
			e.assertNoMutation(t, "a refused Service")
		})
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	t.Run("removes every part, idempotently", func(t *testing.T) {
		e := newEnv(t)
		svc := newService("web", withPort("dns", corev1.ProtocolUDP, 53, 30053))
		e.ensure(t, svc, e.awsNodes(1, 2))
		lbi, _ := e.cloud.LoadBalancer()
		for range 2 {
			if err := lbi.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
				t.Fatal(err)
			}
		}
		if n := e.fake.ResourceCount(); n != 0 {
			t.Errorf("%d resources left", n)
		}
		if _, exists, err := lbi.GetLoadBalancer(ctx, testCluster, svc); exists || err != nil {
			t.Errorf("GetLoadBalancer = %v, %v", exists, err)
		}
	})
	t.Run("a security group AWS still holds keeps the load balancer existing", func(t *testing.T) {
		e := newEnv(t)
		svc := newService("web")
		e.ensure(t, svc, e.awsNodes(1, 1))
		e.fake.SetSecurityGroupReleasePolls(1)
		lbi, _ := e.cloud.LoadBalancer()
		if err := lbi.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err == nil || !strings.Contains(err.Error(), "DependencyViolation") {
			t.Fatalf("first delete: %v, want DependencyViolation", err)
		}
		if _, exists, err := lbi.GetLoadBalancer(ctx, testCluster, svc); !exists || err != nil {
			t.Errorf("GetLoadBalancer with the security group left = %v, %v; want true", exists, err)
		}
		if err := lbi.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
			t.Fatal(err)
		}
		if n := e.fake.ResourceCount(); n != 0 {
			t.Errorf("%d resources left", n)
		}
	})
	t.Run("an outage deletes nothing and reports an error", func(t *testing.T) {
		e := newEnv(t)
		svc := newService("web")
		e.ensure(t, svc, e.awsNodes(1, 1))
		before := e.fake.ResourceCount()
		e.fake.SetOutage(true)
		lbi, _ := e.cloud.LoadBalancer()
		if err := lbi.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err == nil {
			t.Error("delete during an outage succeeded")
		}
		if _, exists, err := lbi.GetLoadBalancer(ctx, testCluster, svc); err == nil || exists {
			t.Errorf("GetLoadBalancer during an outage = %v, %v; want an error", exists, err)
		}
		e.fake.SetOutage(false)
		if n := e.fake.ResourceCount(); n != before {
			t.Errorf("resources %d -> %d", before, n)
		}
	})
	t.Run("a load balancer with our name that is not ours is left alone", func(t *testing.T) {
		e := newEnv(t)
		svc := newService("web")
		_, err := e.cloud.lb.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String(namesFor(testCluster, svc).lb),
			Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: []string{"subnet-0a"}, Tags: []elbtypes.Tag{{Key: awssdk.String("team"), Value: awssdk.String("other")}}})
		if err != nil {
			t.Fatal(err)
		}
		lbi, _ := e.cloud.LoadBalancer()
		e.fake.ResetCalls()
		_, err = lbi.EnsureLoadBalancer(ctx, testCluster, svc, e.awsNodes(1, 1))
		if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonNameConflict {
			t.Errorf("Ensure = %v, want a %s user error", err, reasonNameConflict)
		}
		if err := lbi.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
			t.Fatal(err)
		}
		if len(e.fake.LoadBalancers()) != 1 {
			t.Error("the backend deleted a load balancer that is not its own")
		}
		e.assertNoMutation(t, "Ensure and delete of a load balancer that is not ours")
	})
}

func TestCrashSafety(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withPort("b", corev1.ProtocolTCP, 443, 30443))
	e.fake.FailNext("CreateListener", "AccessDenied")
	lbi, _ := e.cloud.LoadBalancer()
	if _, err := lbi.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err == nil {
		t.Fatal("want the injected failure")
	}
	restarted := buildCloud(t, e.url)
	e.ensure(t, svc, nodes)
	rlb, _ := restarted.LoadBalancer()
	if _, err := rlb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	lb := e.onlyLB(t)
	if len(lb.Listeners) != 2 || len(e.fake.TargetGroups()) != 2 || e.fake.SecurityGroupCount() != 1 {
		t.Errorf("after restart: %+v, %d target groups, %d security groups", lb, len(e.fake.TargetGroups()), e.fake.SecurityGroupCount())
	}

	t.Run("an unattached target group keeps the load balancer existing and is deleted", func(t *testing.T) {
		e.fake.ResetCalls()
		if err := rlb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
			t.Fatal(err)
		}
		e.ensure(t, svc, nodes)
		e.fake.FailNext("CreateLoadBalancer", "AccessDenied")
		if err := rlb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
			t.Fatal(err)
		}
		if n := e.fake.ResourceCount(); n != 0 {
			t.Fatalf("%d left", n)
		}
	})
}

func TestProvisioningIsARetry(t *testing.T) {
	e := newEnv(t)
	e.fake.SetProvisioningPolls(1)
	svc := newService("web")
	nodes := e.awsNodes(1, 1)
	lbi, _ := e.cloud.LoadBalancer()
	var re *api.RetryError
	for i := range 2 {
		if _, err := lbi.EnsureLoadBalancer(context.Background(), testCluster, svc, nodes); !errors.As(err, &re) {
			t.Fatalf("attempt %d: err = %v, want a RetryError", i, err)
		}
	}
	if status := e.ensure(t, svc, nodes); status.Ingress[0].Hostname == "" {
		t.Error("no hostname once active")
	}
	if len(e.fake.LoadBalancers()) != 1 {
		t.Error("more than one load balancer")
	}
}

func TestThrottlingStorm(t *testing.T) {
	e := newEnv(t)
	svc := newService("web")
	nodes := e.awsNodes(1, 3)
	e.fake.Throttle(5)
	e.ensure(t, svc, nodes)
	e.fake.Throttle(5)
	lbi, _ := e.cloud.LoadBalancer()
	if err := lbi.EnsureLoadBalancerDeleted(context.Background(), testCluster, svc); err != nil {
		t.Fatal(err)
	}
	if n := e.fake.ResourceCount(); n != 0 {
		t.Errorf("%d left", n)
	}
}

// TestThrottlingOutlastsTheDeadline: a storm longer than the caller's
// deadline ends in an error at the deadline, with nothing created; the
// retryer does not keep a worker beyond it.
func TestThrottlingOutlastsTheDeadline(t *testing.T) {
	e := newEnv(t, func(s *Settings) {
		s.Retry.MaxAttempts = 1000
		s.Retry.MaxBackoff = &metav1.Duration{Duration: 50 * time.Millisecond}
	})
	nodes := e.awsNodes(1, 1)
	e.fake.Throttle(1 << 30)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	lbi, _ := e.cloud.LoadBalancer()
	start := time.Now()
	if _, err := lbi.EnsureLoadBalancer(ctx, testCluster, newService("web"), nodes); err == nil {
		t.Fatal("Ensure succeeded through a throttling storm")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Ensure returned after %s, want about the 1s deadline", d)
	}
	if n := e.fake.TotalAttempts(); n < 2 {
		t.Errorf("%d attempts (calls %v), want retries", n, e.fake.CallCounts())
	}
	if n := e.fake.ResourceCount(); n != 0 {
		t.Errorf("%d resources created", n)
	}
}

// freshSubnets makes the backend list the VPC's subnets on every reconcile,
// so a subnet tagged in the fake is seen at once.
func (e *env) freshSubnets() { e.cloud.lb.subnetTTL = 0 }

// TestSubnetChanges: an existing NLB is never replaced because the
// discovered subnets changed. Someone tagging a subnet in a zone the NLB is
// in (or untagging one it uses) leaves the NLB, its ARN and DNS name, where
// they are, with a LoadBalancerSubnetsKept user error (a Warning event) after
// the rest (targets) is reconciled; a subnet tagged in a new zone is added
// in place; only the Service's own subnet annotation replaces the NLB.
// Subnets are EnsureLoadBalancer's: an UpdateLoadBalancer meanwhile
// changes the targets only.
func TestSubnetChanges(t *testing.T) {
	ctx := context.Background()
	tagged := func(id, zone, cidr string) awsfake.Subnet {
		return awsfake.Subnet{ID: id, VPCID: testVPC, Zone: zone, CIDR: cidr, Tags: map[string]string{tagRoleELB: "1", tagClusterPrefix + testCluster: "shared"}}
	}
	setUp := func(t *testing.T) (*env, *corev1.Service, []*corev1.Node, awsfake.LoadBalancerView) {
		e := newEnv(t)
		e.freshSubnets()
		svc, nodes := newService("web"), e.awsNodes(1, 2)
		e.ensure(t, svc, nodes)
		lb := e.onlyLB(t)
		if strings.Join(lb.Subnets, ",") != "subnet-0a,subnet-0b" {
			t.Fatalf("subnets = %v", lb.Subnets)
		}
		return e, svc, nodes, lb
	}
	sameLB := func(t *testing.T, e *env, before awsfake.LoadBalancerView, subnets string) {
		t.Helper()
		lb := e.onlyLB(t)
		if lb.ARN != before.ARN || lb.DNSName != before.DNSName || strings.Join(lb.Subnets, ",") != subnets {
			t.Errorf("load balancer %s (%s) in %v, want the same %s (%s) in %s", lb.ARN, lb.DNSName, lb.Subnets, before.ARN, before.DNSName, subnets)
		}
	}
	// ensureShown is EnsureLoadBalancer of the Service whose status shows
	// the NLB.
	ensureShown := func(e *env, svc *corev1.Service, nodes []*corev1.Node, lb awsfake.LoadBalancerView) error {
		svc.Status.LoadBalancer = corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{Hostname: lb.DNSName}}}
		_, err := e.cloud.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
		return err
	}
	wantKept := func(t *testing.T, err error) {
		t.Helper()
		if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonSubnetsKept || !strings.Contains(err.Error(), string(AnnotationSubnets)) {
			t.Errorf("err = %v, want a %s user error naming %s", err, reasonSubnetsKept, AnnotationSubnets)
		}
	}
	t.Run("a subnet tagged in a zone the NLB is in", func(t *testing.T) {
		e, svc, nodes, before := setUp(t)
		lbi, _ := e.cloud.LoadBalancer()
		e.fake.AddSubnet(tagged("subnet-0c", testRegion+"a", "10.0.2.0/24"))
		e.fake.ResetCalls()
		nodes = append(nodes, e.awsNodes(3, 1)...)
		if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatal(err)
		}
		sameLB(t, e, before, "subnet-0a,subnet-0b")
		if m := e.fake.MutatingCalls(); strings.Join(m, ",") != "RegisterTargets" {
			t.Errorf("mutating calls = %v, want RegisterTargets (the new node) only", m)
		}
		e.fake.ResetCalls()
		// A Service whose status does not show the NLB yet (a crash before
		// the status write) gets it first; then the warning.
		status, err := lbi.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
		if err != nil || status == nil || status.Ingress[0].Hostname != before.DNSName {
			t.Fatalf("Ensure of a Service without status = %+v, %v; want the kept NLB's status", status, err)
		}
		svc.Status.LoadBalancer = *status
		_, err = lbi.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
		wantKept(t, err)
		e.assertNoMutation(t, "Ensure with the kept subnets")
		sameLB(t, e, before, "subnet-0a,subnet-0b")
	})
	t.Run("a subnet the NLB uses untagged", func(t *testing.T) {
		e, svc, nodes, before := setUp(t)
		lbi, _ := e.cloud.LoadBalancer()
		e.fake.SetSubnetTag("subnet-0b", tagRoleELB, "0")
		e.fake.ResetCalls()
		if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatal(err)
		}
		wantKept(t, ensureShown(e, svc, nodes, before))
		e.assertNoMutation(t, "Update and Ensure with a zone no longer discovered")
		sameLB(t, e, before, "subnet-0a,subnet-0b")
	})
	t.Run("a subnet tagged in a new zone is added in place", func(t *testing.T) {
		e, svc, nodes, before := setUp(t)
		lbi, _ := e.cloud.LoadBalancer()
		e.fake.AddSubnet(tagged("subnet-0d", testRegion+"c", "10.0.3.0/24"))
		e.fake.ResetCalls()
		if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatal(err)
		}
		e.assertNoMutation(t, "Update with a new zone")
		if err := ensureShown(e, svc, nodes, before); err != nil {
			t.Fatal(err)
		}
		if m := e.fake.MutatingCalls(); strings.Join(m, ",") != "SetSubnets" {
			t.Errorf("mutating calls = %v, want SetSubnets", m)
		}
		sameLB(t, e, before, "subnet-0a,subnet-0b,subnet-0d")
		e.fake.ResetCalls()
		e.ensure(t, svc, nodes)
		e.assertNoMutation(t, "Ensure after the zone was added")
	})
	t.Run("a subnet AWS refuses to add leaves the NLB as it is", func(t *testing.T) {
		e, svc, nodes, before := setUp(t)
		e.fake.AddSubnet(tagged("subnet-0d", testRegion+"c", "10.0.3.0/24"))
		e.fake.FailNext("SetSubnets", "InvalidConfigurationRequest")
		e.fake.ResetCalls()
		nodes = append(nodes, e.awsNodes(3, 1)...)
		err := ensureShown(e, svc, nodes, before)
		wantKept(t, err)
		if err == nil || !strings.Contains(err.Error(), "subnet-0d") {
			t.Errorf("err = %v, want it to name subnet-0d", err)
		}
		if m := e.fake.MutatingCalls(); strings.Join(m, ",") != "SetSubnets,RegisterTargets" {
			t.Errorf("mutating calls = %v, want the refused SetSubnets, then RegisterTargets (the new node)", m)
		}
		sameLB(t, e, before, "subnet-0a,subnet-0b")
	})
	t.Run("the Service's subnet annotation replaces the NLB", func(t *testing.T) {
		e, _, nodes, before := setUp(t)
		e.fake.AddSubnet(tagged("subnet-0c", testRegion+"a", "10.0.2.0/24"))
		svc := newService("web", withAnnotation(AnnotationSubnets, "subnet-0c,subnet-0b"))
		status := e.ensure(t, svc, nodes)
		lb := e.onlyLB(t)
		if lb.ARN == before.ARN || strings.Join(lb.Subnets, ",") != "subnet-0b,subnet-0c" || status.Ingress[0].Hostname != lb.DNSName {
			t.Errorf("load balancer %+v, status %+v; want a new one in subnet-0b,subnet-0c", lb, status)
		}
		e.fake.ResetCalls()
		e.ensure(t, svc, nodes)
		e.assertNoMutation(t, "Ensure after the move")
	})
	t.Run("the annotation adding a zone adds it in place", func(t *testing.T) {
		e, _, nodes, before := setUp(t)
		e.fake.AddSubnet(awsfake.Subnet{ID: "subnet-0d", VPCID: testVPC, Zone: testRegion + "c", CIDR: "10.0.3.0/24"})
		svc := newService("web", withAnnotation(AnnotationSubnets, "subnet-0a,subnet-0b,subnet-0d"))
		e.ensure(t, svc, nodes)
		sameLB(t, e, before, "subnet-0a,subnet-0b,subnet-0d")
	})
}

// TestOtherRegionNodeIsNoLookup: an aws:// node of another region (handed
// to the backend as an IP target) is not looked up in this region's EC2:
// once the cache is warm, an Ensure makes no DescribeInstances call.
func TestOtherRegionNodeIsNoLookup(t *testing.T) {
	e := newEnv(t)
	nodes := append(e.awsNodes(1, 1), newNode("us-east", testutil.WithProviderID("aws:///us-east-1a/i-0123456789abcdef0"), testutil.WithInternalIP("172.16.0.5")))
	svc := newService("web")
	e.ensure(t, svc, nodes)
	if tg := e.fake.TargetGroups(); len(tg) != 1 || tg[0].TargetType != targetIP || len(tg[0].Targets) != 2 {
		t.Fatalf("target groups = %+v, want two IP targets", tg)
	}
	e.fake.ResetCalls()
	e.ensure(t, svc, nodes)
	if n := e.fake.Calls("DescribeInstances"); n != 0 {
		t.Errorf("DescribeInstances calls = %d, want 0", n)
	}
}

// TestIPTargetsKeptAfterRestartAndFailedSync: after a restart the backend
// learns from the NLB's groups that its IP targets are kept; a sync that
// fails after the target type was computed but before the groups were read
// (an AWS error between the two) must not make the next sync forget them
// and replace every group with instance targets.
func TestIPTargetsKeptAfterRestartAndFailedSync(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ec2, other := e.awsNodes(1, 2), otherNodes(1)
	svc := newService("web")
	e.ensure(t, svc, append(ec2, other...))
	e.ensure(t, svc, ec2)

	e.cloud = buildCloud(t, e.url) // a restart: nothing remembered
	lbi, _ := e.cloud.LoadBalancer()
	e.fake.FailNext("DescribeLoadBalancers", "AccessDenied")
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, ec2); err == nil {
		t.Fatal("UpdateLoadBalancer with DescribeLoadBalancers refused: no error")
	}
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, ec2); err != nil {
		t.Fatal(err)
	}
	e.ensure(t, svc, ec2)
	if m := strings.Join(e.fake.MutatingCalls(), ","); m != "" {
		t.Errorf("Update and Ensure after a restart and a failed sync: mutating calls %q, want none", m)
	}
	if tgs := e.fake.TargetGroups(); len(tgs) != 1 || tgs[0].TargetType != targetIP {
		t.Errorf("after a restart and a failed sync: target groups %+v, want one of IP targets", tgs)
	}
}
