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
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// Target groups of the Service's that no listener uses any more (a
// hand-made listener kept one, then went): a repair pass deletes them
// (deleteUnattached).

// runLBController runs our load-balancer controller (classless: it serves
// every LoadBalancer Service, as with upstream's service controller off)
// over a router whose only backend is c, with drift-repair passes every
// resync.
func runLBController(t *testing.T, c *Cloud, client *fake.Clientset, resync time.Duration) {
	t.Helper()
	cfg := &config.CloudConfig{ClusterID: testCluster, LoadBalancer: config.LoadBalancer{DefaultBackend: "aws-1"}}
	r, err := router.New(cfg, []router.Backend{{Name: "aws-1", Type: "aws", Scheme: "aws", Cloud: c}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	r.Initialize(testutil.NewClientBuilder(client), ctx.Done())
	r.SetInformers(factory)
	ctrl, err := lbcontroller.New(r, lbcontroller.Options{Client: client, Services: factory.Core().V1().Services(), Nodes: factory.Core().V1().Nodes(),
		ClusterName: testCluster, Classless: true, ResyncPeriod: resync, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { ctrl.Run(ctx, 2) })
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })
}

// waitListeners waits until the only NLB's listeners are want (sorted,
// comma-separated).
func waitListeners(t *testing.T, e *env, want string) {
	t.Helper()
	eventually(t, "listeners "+want, func() error {
		lbs := e.fake.LoadBalancers()
		if len(lbs) != 1 || strings.Join(lbs[0].Listeners, ",") != want {
			return fmt.Errorf("load balancers %+v", lbs)
		}
		return nil
	})
}

// TestRepairPassDeletesGroupAStrangerKept drives our load-balancer
// controller with drift-repair passes every 300 ms. The Service drops
// port 80 while a hand-made listener forwards to its port-80 group: the
// group stays, through every pass, while that listener uses it. Once the
// listener is deleted, the next pass deletes the group (and reports it),
// and only it: the port-443 group, its listener and its targets stay.
// Before, no pass ever deleted it (the reconcile saw only groups attached
// to a listener): it was left in the account until the Service went.
func TestRepairPassDeletesGroupAStrangerKept(t *testing.T) {
	e := newEnv(t)
	client := testutil.NewClientset()
	runLBController(t, e.cloud, client, 300*time.Millisecond)
	createNodes(t, client, e.awsNodes(1, 2)...)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance), withPort("tls", corev1.ProtocolTCP, 443, 30443))
	if _, err := client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := namesFor(testCluster, svc)
	tg80, tg443 := n.targetGroup(80, "TCP", targetInstance), n.targetGroup(443, "TCP", targetInstance)
	waitListeners(t, e, "TCP:443->"+tg443+",TCP:80->"+tg80)
	eventually(t, "the nodes are targets", groupsHave(e, 2, tg80, tg443))
	theirs := handMadeListener(t, e, e.onlyLB(t).ARN, 9000, e.targetGroups(t)[tg80].ARN)

	editService(t, client, "web", func(s *corev1.Service) { s.Spec.Ports = s.Spec.Ports[1:] })
	waitListeners(t, e, "TCP:443->"+tg443+",TCP:9000->"+tg80)
	// Every reconcile reads the NLB's listeners: two more are two passes'
	// Ensures (nothing else re-ensures an unchanged Service).
	before := e.fake.Calls("DescribeListeners")
	eventually(t, "two repair passes with the hand-made listener", func() error {
		if got := e.fake.Calls("DescribeListeners"); got < before+2 {
			return fmt.Errorf("%d reconciles", got-before)
		}
		return nil
	})
	if _, ok := e.targetGroups(t)[tg80]; !ok {
		t.Fatalf("a repair pass deleted the port-80 group while the hand-made listener forwards to it")
	}

	if _, err := e.cloud.lb.elb.DeleteListener(context.Background(), &elbv2.DeleteListenerInput{ListenerArn: awssdk.String(theirs)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a repair pass deletes the port-80 group", func() error {
		if tg, ok := e.targetGroups(t)[tg80]; ok {
			return fmt.Errorf("%s is left (targets %v)", tg80, tg.Targets)
		}
		return nil
	})
	waitListeners(t, e, "TCP:443->"+tg443)
	if err := groupsHave(e, 2, tg443)(); err != nil {
		t.Error(err)
	}
	eventually(t, "the deletion reported as drift repaired", func() error {
		evs, err := client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Reason == "LoadBalancerDriftRepaired" && strings.Contains(ev.Message, "target group "+tg80+" deleted") {
				return nil
			}
		}
		return fmt.Errorf("no LoadBalancerDriftRepaired event naming %s in %d events", tg80, len(evs.Items))
	})
	deleteService(t, client, "web")
	eventually(t, "nothing left in AWS", func() error {
		if c := e.fake.ResourceCount(); c != 0 {
			return fmt.Errorf("%d resources left", c)
		}
		return nil
	})
}

// keptGroupEnv is a Service ("web", ports 80, 443 and 8080) whose NLB had
// hand-made listeners forwarding to its port-80 and port-8080 groups when
// it dropped those two ports; then the listeners were deleted: both groups
// are the Service's, unattached.
type keptGroupEnv struct {
	*env
	svc          *corev1.Service
	nodes        []*corev1.Node
	tg80, tg8080 string
	tg443        string
}

func newKeptGroupEnv(t *testing.T) *keptGroupEnv {
	t.Helper()
	e := &keptGroupEnv{env: newEnv(t)}
	e.nodes = e.awsNodes(1, 2)
	e.svc = newService("web", withAnnotation(AnnotationTargetType, targetInstance), withPort("tls", corev1.ProtocolTCP, 443, 30443),
		withPort("alt", corev1.ProtocolTCP, 8080, 30808))
	e.ensure(t, e.svc, e.nodes)
	n := namesFor(testCluster, e.svc)
	e.tg80, e.tg443, e.tg8080 = n.targetGroup(80, "TCP", targetInstance), n.targetGroup(443, "TCP", targetInstance), n.targetGroup(8080, "TCP", targetInstance)
	lbARN := e.onlyLB(t).ARN
	a := handMadeListener(t, e.env, lbARN, 9000, e.targetGroups(t)[e.tg80].ARN)
	b := handMadeListener(t, e.env, lbARN, 9001, e.targetGroups(t)[e.tg8080].ARN)
	e.svc.Spec.Ports = e.svc.Spec.Ports[1:2]
	e.ensure(t, e.svc, e.nodes)
	for _, ls := range []string{a, b} {
		if _, err := e.cloud.lb.elb.DeleteListener(context.Background(), &elbv2.DeleteListenerInput{ListenerArn: awssdk.String(ls)}); err != nil {
			t.Fatal(err)
		}
	}
	e.has(t, e.tg80, e.tg443, e.tg8080)
	return e
}

// has checks that exactly the groups names exist.
func (e *keptGroupEnv) has(t *testing.T, names ...string) {
	t.Helper()
	var got []string
	for _, g := range e.fake.TargetGroups() {
		got = append(got, g.Name)
	}
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Errorf("target groups %v, want %v", got, names)
	}
}

// makeGroup creates a target group as someone else would, with tags.
func makeGroup(t *testing.T, e *env, name string, tags map[string]string) string {
	t.Helper()
	out, err := e.cloud.lb.elb.CreateTargetGroup(context.Background(), &elbv2.CreateTargetGroupInput{Name: awssdk.String(name), Protocol: elbtypes.ProtocolEnumTcp,
		Port: awssdk.Int32(30999), VpcId: awssdk.String(testVPC), TargetType: elbtypes.TargetTypeEnumInstance, Tags: elbTags(tags)})
	if err != nil {
		t.Fatal(err)
	}
	return awssdk.ToString(out.TargetGroups[0].TargetGroupArn)
}

// TestRepairPassDeletesOnlyTheServicesUnusedGroups: outside a pass an
// Ensure and a node sync neither read nor delete the unattached groups;
// in a pass the Ensure deletes the Service's two, with one DescribeTags
// and a DeleteTargetGroup each beyond what a pass reads anyway, and
// leaves every group that is not the Service's to delete: one with the
// Service's name prefix but no tags (hand-made), one tagged as another
// Service's, one of the Service's that a listener on a load balancer of
// someone else's uses. A second pass then costs nothing more than a pass
// with nothing changed.
func TestRepairPassDeletesOnlyTheServicesUnusedGroups(t *testing.T) {
	e := newKeptGroupEnv(t)
	n := namesFor(testCluster, e.svc)
	ours := map[string]string{tagClusterPrefix + testCluster: "owned", tagService: n.service}
	handMade := n.tgPrefix() + "9999-tcp-i"
	makeGroup(t, e.env, handMade, nil)
	other := n.tgPrefix() + "9998-tcp-i"
	makeGroup(t, e.env, other, map[string]string{tagClusterPrefix + testCluster: "owned", tagService: "default/other"})
	elsewhere := n.tgPrefix() + "9997-tcp-i"
	elsewhereARN := makeGroup(t, e.env, elsewhere, ours)
	theirLB, err := e.cloud.lb.elb.CreateLoadBalancer(context.Background(), &elbv2.CreateLoadBalancerInput{Name: awssdk.String("someone-elses"),
		Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: []string{"subnet-0a"}})
	if err != nil {
		t.Fatal(err)
	}
	handMadeListener(t, e.env, awssdk.ToString(theirLB.LoadBalancers[0].LoadBalancerArn), 80, elsewhereARN)
	lbi, _ := e.cloud.LoadBalancer()

	e.fake.ResetCalls()
	e.ensure(t, e.svc, e.nodes)
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, e.svc, e.nodes); err != nil {
		t.Fatal(err)
	}
	e.assertNoMutation(t, "an Ensure and a node sync outside a pass")
	e.has(t, e.tg80, e.tg443, e.tg8080, handMade, other, elsewhere)

	e.fake.ResetCalls()
	if _, err := lbi.EnsureLoadBalancer(e.begin(t, true), testCluster, e.svc, e.nodes); err != nil {
		t.Fatal(err)
	}
	e.has(t, e.tg443, handMade, other, elsewhere)
	if got, want := strings.Join(e.fake.MutatingCalls(), ","), "DeleteTargetGroup,DeleteTargetGroup"; got != want {
		t.Errorf("mutating calls of the pass %s, want %s", got, want)
	}
	// The pass's reads (one each of the bulk reads) and the Ensure's
	// per-NLB reads (listeners, attributes, targets), plus the one
	// DescribeTags of the candidates.
	got := e.fake.CallCounts()
	for op, want := range map[string]int{"DescribeTags": 2, "DescribeTargetGroups": 1, "DescribeLoadBalancers": 1, "DescribeListeners": 1, "DescribeTargetHealth": 1} {
		if got[op] != want {
			t.Errorf("%s: %d calls, want %d (all: %v)", op, got[op], want, got)
		}
	}

	e.fake.ResetCalls()
	if _, err := lbi.EnsureLoadBalancer(e.begin(t, true), testCluster, e.svc, e.nodes); err != nil {
		t.Fatal(err)
	}
	e.assertNoMutation(t, "a second pass")
	if got := e.fake.Calls("DescribeTags"); got != 2 {
		t.Errorf("DescribeTags: %d calls in the second pass, want 2 (the NLBs', the candidates')", got)
	}
	e.has(t, e.tg443, handMade, other, elsewhere)
}

// TestRepairPassUnattachedGroupErrors: a group that a listener uses again
// since the pass read it is refused by AWS and kept, and the Ensure goes
// on; a deletion that fails (AccessDenied after the first) fails the
// Ensure with the group and its tags intact, and the next pass deletes
// it.
func TestRepairPassUnattachedGroupErrors(t *testing.T) {
	e := newKeptGroupEnv(t)
	lbi, _ := e.cloud.LoadBalancer()
	ctx := e.begin(t, true)
	handMadeListener(t, e.env, e.onlyLB(t).ARN, 9000, e.targetGroups(t)[e.tg80].ARN)
	if _, err := lbi.EnsureLoadBalancer(ctx, testCluster, e.svc, e.nodes); err != nil {
		t.Fatalf("Ensure with a group in use again: %v", err)
	}
	e.has(t, e.tg80, e.tg443)

	e = newKeptGroupEnv(t)
	lbi, _ = e.cloud.LoadBalancer()
	ctx = e.begin(t, true)
	e.fake.FailMutationsAfter(1)
	_, err := lbi.EnsureLoadBalancer(ctx, testCluster, e.svc, e.nodes)
	if err == nil || !strings.Contains(err.Error(), "DeleteTargetGroup") {
		t.Fatalf("Ensure with a failing DeleteTargetGroup: %v, want its error", err)
	}
	e.fake.ClearMutationFailures()
	e.has(t, e.tg443, e.tg8080)
	if tags := e.targetGroups(t)[e.tg8080].Tags; tags[tagService] != "default/web" {
		t.Errorf("the group left has tags %v", tags)
	}
	if _, err := lbi.EnsureLoadBalancer(e.begin(t, true), testCluster, e.svc, e.nodes); err != nil {
		t.Fatal(err)
	}
	e.has(t, e.tg443)
}

// TestRepairPassUnattachedGroupsThrottled: a deletion throttled in the
// middle of the pass's deletions (retried by the SDK) deletes both
// groups, with one call each.
func TestRepairPassUnattachedGroupsThrottled(t *testing.T) {
	e := newKeptGroupEnv(t)
	lbi, _ := e.cloud.LoadBalancer()
	ctx := e.begin(t, true)
	e.fake.ResetCalls()
	e.fake.FailNext("DeleteTargetGroup", "Throttling")
	if _, err := lbi.EnsureLoadBalancer(ctx, testCluster, e.svc, e.nodes); err != nil {
		t.Fatal(err)
	}
	e.has(t, e.tg443)
	if got := e.fake.Calls("DeleteTargetGroup"); got != 2 {
		t.Errorf("DeleteTargetGroup answered %d times, want 2", got)
	}
}

// TestRepairPassUnattachedGroupsDryRun: a plan under a pass deletes
// nothing; it says that the pass would delete both groups.
func TestRepairPassUnattachedGroupsDryRun(t *testing.T) {
	e := newKeptGroupEnv(t)
	lbi, _ := e.cloud.LoadBalancer()
	dctx, intents := backends.WithDryRun(e.begin(t, true))
	e.fake.ResetCalls()
	if _, err := lbi.EnsureLoadBalancer(dctx, testCluster, e.svc, e.nodes); err != nil {
		t.Fatal(err)
	}
	e.assertNoMutation(t, "a plan")
	e.has(t, e.tg80, e.tg443, e.tg8080)
	deletes := 0
	for _, in := range intents() {
		if in.Call == "elasticloadbalancing:DeleteTargetGroup" {
			deletes++
		}
	}
	if deletes != 2 {
		t.Errorf("the plan says %d target groups deleted, want 2: %v", deletes, intents())
	}
}

// TestRepairPassDeletesAdoptedGroupAStrangerKept: on an adopted NLB, the
// Service's port moves (80 to 81) while a hand-made listener forwards to
// upstream's port-80 group: the listener moves to the backend's new
// group, and upstream's group stays (tagDetachedGroups drops it from its
// record: a listener still uses it). Once the hand-made listener is gone,
// an Ensure outside a pass leaves the group, and a pass deletes it: it is
// tagged as the cluster's and the Service's, named as upstream names the
// Service's groups.
func TestRepairPassDeletesAdoptedGroupAStrangerKept(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	e.ensure(t, svc, nodes)
	const upstreamTG = "k8s-default-web-0a1b2c3d4e"
	theirs := handMadeListener(t, e, e.onlyLB(t).ARN, 9000, e.targetGroups(t)[upstreamTG].ARN)
	svc.Spec.Ports[0].Port = 81
	e.ensure(t, svc, nodes)
	tg81 := namesFor(testCluster, svc).targetGroup(81, "TCP", targetInstance)
	if got, want := strings.Join(e.onlyLB(t).Listeners, ","), "TCP:81->"+tg81+",TCP:9000->"+upstreamTG; got != want {
		t.Fatalf("listeners %s, want %s", got, want)
	}
	if _, err := e.cloud.lb.elb.DeleteListener(context.Background(), &elbv2.DeleteListenerInput{ListenerArn: awssdk.String(theirs)}); err != nil {
		t.Fatal(err)
	}
	e.ensure(t, svc, nodes)
	if _, ok := e.targetGroups(t)[upstreamTG]; !ok {
		t.Fatalf("an Ensure outside a pass deleted %s", upstreamTG)
	}
	lbi, _ := e.cloud.LoadBalancer()
	if _, err := lbi.EnsureLoadBalancer(e.begin(t, true), testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	var got []string
	for name := range e.targetGroups(t) {
		got = append(got, name)
	}
	if len(got) != 1 || got[0] != tg81 {
		t.Errorf("target groups after the pass %v, want only %s", got, tg81)
	}
}
