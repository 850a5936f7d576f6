package aws

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// reads returns the calls of fake's Describe actions made since its last
// reset, "action=count", sorted.
func reads(e *env) []string {
	var out []string
	for op, n := range e.fake.CallCounts() {
		if strings.HasPrefix(op, "Describe") && n > 0 {
			out = append(out, fmt.Sprintf("%s=%d", op, n))
		}
	}
	sort.Strings(out)
	return out
}

// groupsHave checks that each of the Service's target groups named in
// names has want targets.
func groupsHave(e *env, want int, names ...string) func() error {
	return func() error {
		tgs := map[string][]string{}
		for _, g := range e.fake.TargetGroups() {
			tgs[g.Name] = g.Targets
		}
		for _, n := range names {
			if len(tgs[n]) != want {
				return fmt.Errorf("targets of %s: %v, want %d", n, tgs[n], want)
			}
		}
		return nil
	}
}

// TestNodeSyncFromVerifiedView: a node excluded from load balancers
// reaches the Service's NLB, through the upstream service controller, with
// exactly one DeregisterTargets per target group (two ports, two groups)
// and no read of EC2 or ELBv2: the backend's verified view (recorded by
// the Ensure and the node sync before) serves the node sync. Before, each
// node sync read the NLB, its tags, its target groups and their targets.
func TestNodeSyncFromVerifiedView(t *testing.T) {
	e := newEnv(t)
	client := testutil.NewClientset()
	runServiceController(t, e.cloud, client)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance), withPort("tls", corev1.ProtocolTCP, 443, 30443))
	if _, err := client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := namesFor(testCluster, svc)
	groups := []string{n.targetGroup(80, "TCP", targetInstance), n.targetGroup(443, "TCP", targetInstance)}
	eventually(t, "the NLB with both listeners", func() error {
		if lbs := e.fake.LoadBalancers(); len(lbs) != 1 || len(lbs[0].Listeners) != 2 {
			return fmt.Errorf("load balancers %+v", lbs)
		}
		return nil
	})
	nodes := e.awsNodes(1, 3)
	createNodes(t, client, nodes...)
	eventually(t, "the three nodes are targets of both groups", groupsHave(e, 3, groups...))

	e.fake.ResetCalls()
	excluded := nodes[2].DeepCopy()
	excluded.Labels[corev1.LabelNodeExcludeBalancers] = "true"
	if _, err := client.CoreV1().Nodes().Update(context.Background(), excluded, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the excluded node deregistered from both groups", groupsHave(e, 2, groups...))
	if got := e.fake.Calls("DeregisterTargets"); got != len(groups) {
		t.Errorf("DeregisterTargets calls = %d, want %d (one per target group)", got, len(groups))
	}
	if r := reads(e); len(r) != 0 {
		t.Errorf("a node excluded read %v, want no read (the verified view)", r)
	}
	if m := e.fake.MutatingCalls(); strings.Join(m, ",") != "DeregisterTargets,DeregisterTargets" {
		t.Errorf("mutating calls %v, want DeregisterTargets per group", m)
	}
}

// TestVerifiedViewRepairedBehindOurBack: what changes behind the
// backend's back after it recorded its view is the repair pass's: a target
// deregistered by hand stays so through node syncs with the same nodes (the
// view says it is there), until a repair pass (the whole reconcile)
// registers it again and records a fresh view, which the next node change
// uses (one DeregisterTargets, no read). A target group deleted behind its
// back makes the node sync's write answer TargetGroupNotFound: it falls
// back to the whole reconcile, which makes the group again with the
// targets.
func TestVerifiedViewRepairedBehindOurBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	arn := e.targetGroups(t)[tg].ARN
	if _, err := e.cloud.lb.elb.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: awssdk.String(arn),
		Targets: []elbtypes.TargetDescription{{Id: awssdk.String(instanceID(3)), Port: awssdk.Int32(30080)}}}); err != nil {
		t.Fatal(err)
	}
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.TotalCalls(); got != 0 {
		t.Errorf("a node sync with the same nodes made %d calls (%v), want none", got, e.fake.CallCounts())
	}

	pctx, end, err := e.cloud.lb.BeginRepairPass(ctx, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lbi.EnsureLoadBalancer(pctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	end()
	if err := groupsHave(e, 3, tg)(); err != nil {
		t.Fatalf("after the repair pass: %v", err)
	}

	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if m, r := e.fake.MutatingCalls(), reads(e); strings.Join(m, ",") != "DeregisterTargets" || len(r) != 0 {
		t.Errorf("a node excluded after the pass: mutating calls %v, reads %v; want one DeregisterTargets, no read", m, r)
	}
	if err := groupsHave(e, 2, tg)(); err != nil {
		t.Fatal(err)
	}

	deleteListenersAndGroup(t, e, arn)
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("a node sync after the group was deleted behind its back: %v", err)
	}
	if err := groupsHave(e, 3, tg)(); err != nil {
		t.Errorf("after the node sync fell back to the whole reconcile: %v", err)
	}
	if got, want := strings.Join(e.onlyLB(t).Listeners, ","), "TCP:80->"+tg; got != want {
		t.Errorf("listeners %s, want %s", got, want)
	}
}

// deleteListenersAndGroup deletes, as someone would by hand, the
// listeners of the only NLB and then the target group arn.
func deleteListenersAndGroup(t *testing.T, e *env, arn string) {
	t.Helper()
	ctx := context.Background()
	out, err := e.cloud.lb.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(e.onlyLB(t).ARN)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ls := range out.Listeners {
		if _, err := e.cloud.lb.elb.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: ls.ListenerArn}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.cloud.lb.elb.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: awssdk.String(arn)}); err != nil {
		t.Fatal(err)
	}
}
