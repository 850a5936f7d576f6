package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// Review probes of branch s49-aws5k (issue #42): the batch instance lookup
// (instanceCache.listed), the instance carried by a target into the
// security-group step (instanceGroups), and the verified view's interned
// target set (targetSet) shared by every Service with the same targets.
// Each drives the backend's LoadBalancer as the service controller calls it
// and checks what is in AWS after.

// registeredIn returns the targets of the target group named tg, sorted.
func registeredIn(e *env, tg string) []string {
	for _, g := range e.fake.TargetGroups() {
		if g.Name == tg {
			return slices.Sorted(slices.Values(g.Targets))
		}
	}
	return nil
}

// wantTargets returns "<instance>:30080" of each instance n.
func wantTargets(ns ...int) []string {
	var out []string
	for _, n := range ns {
		out = append(out, instanceID(n)+":30080")
	}
	return slices.Sorted(slices.Values(out))
}

// tagClusterOwned tags the security group id as the cluster's.
func tagClusterOwned(t *testing.T, e *env, id string) {
	t.Helper()
	if _, err := e.cloud.lb.ec2.(dryRunEC2).EC2API.(*ec2.Client).CreateTags(context.Background(), &ec2.CreateTagsInput{Resources: []string{id},
		Tags: []ec2types.Tag{{Key: awssdk.String(tagClusterPrefix + testCluster), Value: awssdk.String("owned")}}}); err != nil {
		t.Fatal(err)
	}
}

// TestProbe5kOtherCloudServiceUnaffectedByFailedInstanceListing: an NLB
// whose nodes are all another cloud's (IP targets; regionalID says "no
// lookup" for them) does not depend on EC2's DescribeInstances. On main it
// never touched the instance cache; on the branch targetsFor asks
// instanceCache.listed for every Service, which takes the snapshot even
// when no node has an instance ID: when that snapshot is due for a refresh
// (another Service's instances are in it) and the refresh fails, this
// Service fails with the listing's error.
func TestProbe5kOtherCloudServiceUnaffectedByFailedInstanceListing(t *testing.T) {
	e := newEnv(t, func(s *Settings) { s.InstanceCacheTTL = &metav1.Duration{Duration: 50 * time.Millisecond} })
	e.ensure(t, newService("on-ec2"), e.awsNodes(1, 2))
	time.Sleep(100 * time.Millisecond) // the listing is stale
	lbi, _ := e.cloud.LoadBalancer()
	e.fake.FailNext("DescribeInstances", "UnauthorizedOperation")
	svc := newService("on-vsphere", withAnnotation(AnnotationTargetType, targetIP))
	if _, err := lbi.EnsureLoadBalancer(context.Background(), testCluster, svc, otherNodes(2)); err != nil {
		t.Fatalf("EnsureLoadBalancer of a Service whose nodes are all another cloud's failed with the instance listing's error: %v", err)
	}
}

// TestProbe5kOneAbsentInstanceDoesNotDropOthers: one node whose instance
// AWS does not know (the batch listing lacks it: asked for directly, then
// "gone") is simply not a target; the other nodes are, with no error.
func TestProbe5kOneAbsentInstanceDoesNotDropOthers(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	ghost := newNode("ghost", testutil.WithProviderID(providerID(testRegion+"a", instanceID(99))), testutil.WithInternalIP("10.0.10.99"))
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, append(slices.Clone(nodes), ghost))
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	if got, want := registeredIn(e, tg), wantTargets(1, 2, 3); !slices.Equal(got, want) {
		t.Errorf("targets %v, want %v", got, want)
	}
	// And a node sync from the view adding a real node keeps the ghost out.
	nodes = append(nodes, e.awsNodes(4, 1)...)
	if err := func() error {
		lbi, _ := e.cloud.LoadBalancer()
		return lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, append(slices.Clone(nodes), ghost))
	}(); err != nil {
		t.Fatal(err)
	}
	if got, want := registeredIn(e, tg), wantTargets(1, 2, 3, 4); !slices.Equal(got, want) {
		t.Errorf("after a node joined: targets %v, want %v", got, want)
	}
}

// TestProbe5kRenamedNodeSameInstanceSeveralGroups: two Node objects naming
// the same instance (a node re-registered under a new name while the old
// Node is still there) whose instance has several security groups, one
// tagged as the cluster's. On main instanceGroups kept one group list per
// instance (several[t.id] = ids); on the branch it appends per target, so
// the doubled instance lists its tagged group twice and clusterTaggedGroups
// fails the Service with "2 are tagged".
func TestProbe5kRenamedNodeSameInstanceSeveralGroups(t *testing.T) {
	e := newEnv(t)
	tagged, other := userSG(t, e, "nodes"), userSG(t, e, "ssh")
	tagClusterOwned(t, e, tagged)
	in := e.addInstance(1, func(in *awsfake.Instance) { in.SecurityGroups = []string{other, tagged} })
	pid := testutil.WithProviderID(providerID(in.Zone, in.ID))
	nodes := []*corev1.Node{
		newNode(in.PrivateDNSName, pid, testutil.WithInternalIP(in.PrivateIPs[0])),
		newNode("renamed-"+in.PrivateDNSName, pid, testutil.WithInternalIP(in.PrivateIPs[0])),
	}
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	lbi, _ := e.cloud.LoadBalancer()
	if _, err := lbi.EnsureLoadBalancer(context.Background(), testCluster, svc, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer with two Nodes of one instance with several groups: %v", err)
	}
	if r := strings.Join(e.fake.SecurityGroupIngress(tagged), ","); !strings.Contains(r, "tcp:30080-30080:") {
		t.Errorf("tagged group rules %s, want the NodePort allowed", r)
	}
}

// TestProbe5kSecurityGroupsMixedNodes: instance targets (annotation) over
// EC2 instances sharing one group, an instance with several groups (one
// tagged), and another cloud's nodes: the other cloud's nodes are no
// targets and need no group; the shared group is authorized once; the
// untagged group gets nothing.
func TestProbe5kSecurityGroupsMixedNodes(t *testing.T) {
	e := newEnv(t)
	shared, tagged, other := userSG(t, e, "nodes-a"), userSG(t, e, "nodes-b"), userSG(t, e, "ssh")
	tagClusterOwned(t, e, tagged)
	var nodes []*corev1.Node
	for i := 1; i <= 4; i++ {
		in := e.addInstance(i, func(in *awsfake.Instance) {
			in.SecurityGroups = []string{shared}
			if i == 4 {
				in.SecurityGroups = []string{other, tagged}
			}
		})
		nodes = append(nodes, newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0])))
	}
	nodes = append(nodes, otherNodes(2)...)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.fake.ResetCalls()
	e.ensure(t, svc, nodes)
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	if got, want := registeredIn(e, tg), wantTargets(1, 2, 3, 4); !slices.Equal(got, want) {
		t.Errorf("targets %v, want %v", got, want)
	}
	for id, want := range map[string]bool{shared: true, tagged: true, other: false} {
		has := strings.Contains(strings.Join(e.fake.SecurityGroupIngress(id), ","), "tcp:30080-30080:sg-")
		if has != want {
			t.Errorf("group %s: NodePort allowed from our group %v, want %v (%v)", id, has, want, e.fake.SecurityGroupIngress(id))
		}
	}
	t.Logf("DescribeInstances calls of a first Ensure (no node lister, so each instance is a miss asked alone): %d", e.fake.Calls("DescribeInstances"))
	// An untagged instance joins with several groups: the Service reports
	// the documented error naming the instance, and keeps the others.
	bad := e.addInstance(5, func(in *awsfake.Instance) { in.SecurityGroups = []string{other, shared} })
	nodes = append(nodes, newNode(bad.PrivateDNSName, testutil.WithProviderID(providerID(bad.Zone, bad.ID)), testutil.WithInternalIP(bad.PrivateIPs[0])))
	lbi, _ := e.cloud.LoadBalancer()
	err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes)
	if err == nil || !strings.Contains(err.Error(), bad.ID) || !strings.Contains(err.Error(), "tag exactly one") {
		t.Errorf("node sync with an instance of two untagged groups: error %v, want one naming %s and the fix", err, bad.ID)
	}
}

// TestProbe5kSharedTargetSetOneServiceChanges: three Services with the same
// nodes, so the verified views of two share one interned target set; node
// syncs from the views of one never change the other's targets or make the
// other's next node sync write what is not needed. One Service narrows its
// targets by target-node-labels, one takes IP targets.
func TestProbe5kSharedTargetSetOneServiceChanges(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 4)
	nodes[0].Labels["pool"], nodes[1].Labels["pool"] = "edge", "edge"
	a := newService("a", withAnnotation(AnnotationTargetType, targetInstance))
	b := newService("b", withAnnotation(AnnotationTargetType, targetInstance))
	lab := newService("lab", withAnnotations(map[annotation.Name]string{AnnotationTargetType: targetInstance, AnnotationTargetNodeLabels: "pool=edge"}))
	ip := newService("ip", withAnnotation(AnnotationTargetType, targetIP))
	for _, s := range []*corev1.Service{a, b, lab, ip} {
		e.ensure(t, s, nodes)
	}
	lbi, _ := e.cloud.LoadBalancer()
	tgA := namesFor(testCluster, a).targetGroup(80, "TCP", targetInstance)
	tgB := namesFor(testCluster, b).targetGroup(80, "TCP", targetInstance)
	tgL := namesFor(testCluster, lab).targetGroup(80, "TCP", targetInstance)
	tgI := namesFor(testCluster, ip).targetGroup(80, "TCP", targetIP)
	if va, vb := e.cloud.lb.verified.views[namesFor(testCluster, a).lb], e.cloud.lb.verified.views[namesFor(testCluster, b).lb]; va == nil || vb == nil || va.targets != vb.targets {
		t.Fatalf("the views of two Services with the same targets do not share one target set (a %v, b %v)", va, vb)
	}
	update := func(s *corev1.Service, ns []*corev1.Node) {
		t.Helper()
		if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, s, ns); err != nil {
			t.Fatalf("UpdateLoadBalancer %s: %v", s.Name, err)
		}
	}
	// a loses node 4.
	update(a, nodes[:3])
	// b's node sync with every node changes nothing.
	e.fake.ResetCalls()
	update(b, nodes)
	e.assertNoMutation(t, "b's node sync with its nodes unchanged after a's changed")
	// b loses node 1 and node 3; a gets node 4 back.
	update(b, []*corev1.Node{nodes[1], nodes[3]})
	update(a, nodes)
	// Every Service's sync with node 2 gone.
	rest := []*corev1.Node{nodes[0], nodes[2], nodes[3]}
	for _, s := range []*corev1.Service{a, b, lab, ip} {
		update(s, rest)
	}
	for tg, want := range map[string][]string{tgA: wantTargets(1, 3, 4), tgB: wantTargets(1, 3, 4), tgL: wantTargets(1)} {
		if got := registeredIn(e, tg); !slices.Equal(got, want) {
			t.Errorf("%s: targets %v, want %v", tg, got, want)
		}
	}
	var wantIP []string
	for _, n := range rest {
		wantIP = append(wantIP, n.Status.Addresses[0].Address+":30080")
	}
	slices.Sort(wantIP)
	if got := registeredIn(e, tgI); !slices.Equal(got, wantIP) {
		t.Errorf("%s: targets %v, want %v", tgI, got, wantIP)
	}
	// The views agree with AWS: a full reconcile of each changes nothing.
	e.fake.ResetCalls()
	for _, s := range []*corev1.Service{a, b, lab, ip} {
		e.ensure(t, s, rest)
	}
	e.assertNoMutation(t, "ensuring every Service again")
}

// TestProbe5kLocalTrafficSharedTargets: two Services with the same nodes,
// one with externalTrafficPolicy Local (its own health check port): the
// shared target set is the same; switching one to Cluster and a node
// excluded keeps both right.
func TestProbe5kLocalTrafficSharedTargets(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	local := newService("local", withAnnotation(AnnotationTargetType, targetInstance), testutil.WithLocalTraffic(32000))
	plain := newService("plain", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, local, nodes)
	e.ensure(t, plain, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, local, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	local.Spec.HealthCheckNodePort = 0
	e.ensure(t, local, nodes[:2])
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, plain, nodes[1:]); err != nil {
		t.Fatal(err)
	}
	if got, want := registeredIn(e, namesFor(testCluster, local).targetGroup(80, "TCP", targetInstance)), wantTargets(1, 2); !slices.Equal(got, want) {
		t.Errorf("local: %v, want %v", got, want)
	}
	if got, want := registeredIn(e, namesFor(testCluster, plain).targetGroup(80, "TCP", targetInstance)), wantTargets(2, 3); !slices.Equal(got, want) {
		t.Errorf("plain: %v, want %v", got, want)
	}
}

// TestProbe5kConcurrentServicesSharingTargets: node syncs of several
// Services with the same node lists at once (run with -race): the shared
// target set, the instance cache's batch lookup and the views are safe;
// after a last sequential sync every group holds the last nodes.
func TestProbe5kConcurrentServicesSharingTargets(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 4)
	var svcs []*corev1.Service
	for i := range 4 {
		s := newService(fmt.Sprintf("s%d", i), withAnnotation(AnnotationTargetType, targetInstance))
		svcs = append(svcs, s)
		e.ensure(t, s, nodes)
	}
	lbi, _ := e.cloud.LoadBalancer()
	sets := [][]*corev1.Node{nodes, nodes[:3], nodes[1:], {nodes[0], nodes[3]}}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i, s := range svcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 4 {
				ns := sets[(i+round)%len(sets)]
				if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, s, ns); err != nil {
					errs <- fmt.Errorf("%s round %d: %w", s.Name, round, err)
				}
				// A full Ensure of the same Service meanwhile, as a Service
				// update would: the other goroutines' views are its peers.
				if round == 1 {
					if _, err := lbi.EnsureLoadBalancer(context.Background(), testCluster, s, ns); err != nil {
						errs <- fmt.Errorf("%s ensure: %w", s.Name, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, s := range svcs {
		if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, s, nodes[1:3]); err != nil {
			t.Fatal(err)
		}
		if got, want := registeredIn(e, namesFor(testCluster, s).targetGroup(80, "TCP", targetInstance)), wantTargets(2, 3); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", s.Name, got, want)
		}
	}
}

// TestProbe5kSameServiceConcurrentSyncs: a node excluded while another
// node sync of the same Service is in flight (a node sync and a Service
// update racing): whatever the order, the last sync run alone afterwards
// leaves the groups right and the view agreeing with AWS.
func TestProbe5kSameServiceConcurrentSyncs(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 4)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance), withPort("tls", corev1.ProtocolTCP, 443, 30443))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := nodes
			if i%2 == 1 {
				ns = nodes[:3]
			}
			if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, ns); err != nil {
				t.Logf("concurrent sync %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes[1:]); err != nil {
		t.Fatal(err)
	}
	n := namesFor(testCluster, svc)
	for _, tg := range []string{n.targetGroup(80, "TCP", targetInstance), n.targetGroup(443, "TCP", targetInstance)} {
		want := wantTargets(2, 3, 4)
		if tg == n.targetGroup(443, "TCP", targetInstance) {
			want = nil
			for _, w := range wantTargets(2, 3, 4) {
				want = append(want, strings.Replace(w, ":30080", ":30443", 1))
			}
		}
		if got := registeredIn(e, tg); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", tg, got, want)
		}
	}
	e.fake.ResetCalls()
	e.ensure(t, svc, nodes[1:])
	e.assertNoMutation(t, "a full reconcile after the syncs")
}

// TestProbe5kRepairPassWithSharedViews: a target deregistered behind our
// back from one of two Services sharing a target set: the repair pass puts
// it back, and node syncs of both from their views after stay right.
func TestProbe5kRepairPassWithSharedViews(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	a := newService("a", withAnnotation(AnnotationTargetType, targetInstance))
	b := newService("b", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, a, nodes)
	e.ensure(t, b, nodes)
	tgA := namesFor(testCluster, a).targetGroup(80, "TCP", targetInstance)
	tgB := namesFor(testCluster, b).targetGroup(80, "TCP", targetInstance)
	var arn string
	for _, g := range e.fake.TargetGroups() {
		if g.Name == tgA {
			arn = g.ARN
		}
	}
	if _, err := e.cloud.lb.elb.DeregisterTargets(context.Background(), &elbv2.DeregisterTargetsInput{TargetGroupArn: awssdk.String(arn),
		Targets: []elbtypes.TargetDescription{{Id: awssdk.String(instanceID(2)), Port: awssdk.Int32(30080)}}}); err != nil {
		t.Fatal(err)
	}
	ctx := e.begin(t, true)
	lbi, _ := e.cloud.LoadBalancer()
	for _, s := range []*corev1.Service{a, b} {
		if _, err := lbi.EnsureLoadBalancer(ctx, testCluster, s, nodes); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := registeredIn(e, tgA), wantTargets(1, 2, 3); !slices.Equal(got, want) {
		t.Fatalf("after the repair pass: %s %v, want %v", tgA, got, want)
	}
	for _, s := range []*corev1.Service{a, b} {
		if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, s, nodes[:2]); err != nil {
			t.Fatal(err)
		}
	}
	for _, tg := range []string{tgA, tgB} {
		if got, want := registeredIn(e, tg), wantTargets(1, 2); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", tg, got, want)
		}
	}
}

// TestProbe5kTargetTypeSwitchWithSharedSet: two Services with no target
// type annotation on the same EC2 nodes (instance targets, one shared
// target set); another cloud's node joins one of them (IP targets for it,
// new groups), then leaves: each Service's groups follow, and the other
// Service's node syncs from its view stay right.
func TestProbe5kTargetTypeSwitchWithSharedSet(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	a, b := newService("a"), newService("b")
	e.ensure(t, a, nodes)
	e.ensure(t, b, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	mixed := append(slices.Clone(nodes), otherNodes(1)...)
	if _, err := lbi.EnsureLoadBalancer(context.Background(), testCluster, a, mixed); err != nil {
		t.Fatal(err)
	}
	if tg := svcForwardsTo(e, a, "80"); tg != namesFor(testCluster, a).targetGroup(80, "TCP", targetIP) {
		t.Fatalf("a with another cloud's node forwards to %q, want its IP group", tg)
	}
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, b, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if got, want := registeredIn(e, namesFor(testCluster, b).targetGroup(80, "TCP", targetInstance)), wantTargets(1, 2); !slices.Equal(got, want) {
		t.Errorf("b: %v, want %v", got, want)
	}
	var wantIP []string
	for _, n := range mixed {
		w := n.Status.Addresses[0].Address + ":30080"
		if strings.HasPrefix(w, "192.168.") {
			w += "@all" // outside the VPC: AvailabilityZone all
		}
		wantIP = append(wantIP, w)
	}
	slices.Sort(wantIP)
	if got := registeredIn(e, namesFor(testCluster, a).targetGroup(80, "TCP", targetIP)); !slices.Equal(got, wantIP) {
		t.Errorf("a's IP group: %v, want %v", got, wantIP)
	}
	e.fake.ResetCalls()
	e.ensure(t, b, nodes[:2])
	e.ensure(t, a, mixed)
	e.assertNoMutation(t, "ensuring both again")
	// A node sync of a from its view (its set holds a target "@all"):
	// the first EC2 node leaves, the other cloud's node stays.
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, a, mixed[1:]); err != nil {
		t.Fatal(err)
	}
	if got := registeredIn(e, namesFor(testCluster, a).targetGroup(80, "TCP", targetIP)); !slices.Equal(got, slices.DeleteFunc(slices.Clone(wantIP), func(w string) bool {
		return strings.HasPrefix(w, nodes[0].Status.Addresses[0].Address+":")
	})) {
		t.Errorf("a's IP group after node 1 left: %v", got)
	}
	e.fake.ResetCalls()
	e.ensure(t, a, mixed[1:])
	e.assertNoMutation(t, "ensuring a after the node sync")
}

// TestProbe5kReloadNewBackendSyncs: a reload that changes the AWS backend
// builds a new one (New) against the same account; its first node sync of
// a Service the old one created (no view yet) and the next (from the view
// it recorded) are right, while the old backend, still serving an
// in-flight call, syncs another Service with the same targets.
func TestProbe5kReloadNewBackendSyncs(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	a := newService("a", withAnnotation(AnnotationTargetType, targetInstance))
	b := newService("b", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, a, nodes)
	e.ensure(t, b, nodes)
	old, _ := e.cloud.LoadBalancer()
	reloaded := buildCloud(t, e.url, func(s *Settings) { s.InstanceCacheTTL = &metav1.Duration{Duration: 2 * time.Minute} })
	lbi, _ := reloaded.LoadBalancer()
	var wg sync.WaitGroup
	wg.Add(2)
	var errA, errB error
	go func() {
		defer wg.Done()
		errA = lbi.UpdateLoadBalancer(context.Background(), testCluster, a, nodes[:2])
	}()
	go func() {
		defer wg.Done()
		errB = old.UpdateLoadBalancer(context.Background(), testCluster, b, nodes[1:])
	}()
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("node syncs across the reload: new %v, old %v", errA, errB)
	}
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, a, nodes[1:]); err != nil {
		t.Fatal(err)
	}
	if got, want := registeredIn(e, namesFor(testCluster, a).targetGroup(80, "TCP", targetInstance)), wantTargets(2, 3); !slices.Equal(got, want) {
		t.Errorf("a: %v, want %v", got, want)
	}
	if got, want := registeredIn(e, namesFor(testCluster, b).targetGroup(80, "TCP", targetInstance)), wantTargets(2, 3); !slices.Equal(got, want) {
		t.Errorf("b: %v, want %v", got, want)
	}
}

// svcForwardsTo returns the target-group name svc's NLB's listener on port
// forwards to ("" when none).
func svcForwardsTo(e *env, svc *corev1.Service, port string) string {
	for _, lb := range e.fake.LoadBalancers() {
		if lb.Name != namesFor(testCluster, svc).lb {
			continue
		}
		for _, l := range lb.Listeners {
			if p, tg, ok := strings.Cut(l, "->"); ok && strings.HasSuffix(p, ":"+port) {
				return tg
			}
		}
	}
	return ""
}
