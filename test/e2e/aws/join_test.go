package aws

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// joinLabel selects the nodes of TestJoiningNodeKeepsInstanceTargets'
// Service (its target-node-labels), so that other tests' nodes of another
// cloud, which would make every target an IP target, are not its targets.
const joinLabel = "e2e.multicloud-ccm.io/join"

// TestJoiningNodeKeepsInstanceTargets: an NLB with instance targets (no
// target type annotated) keeps its target group while an EC2 node joins
// and has no providerID yet, as every node has until the node controller
// initialises it. The load-balancer controller (as upstream's service
// controller) hands such a node to the backend; before 555b774 it made
// every such NLB switch to IP targets (a target group created, the
// listeners moved to it) and back once the providerID was set. Here the node joins without the
// uninitialized taint, so the node controller leaves it alone and the
// window is as long as the test needs; the providerID is then set as the
// node controller would, and the instance becomes a target of the same
// group.
func TestJoiningNodeKeepsInstanceTargets(t *testing.T) {
	cp := env(t)
	ctx := ctxFor(t)
	first, joining := seeded.Instances[2], seeded.Instances[3]
	createJoinNode(ctx, t, cp, first.PrivateDNSName, fmt.Sprintf("aws:///%s/%s", first.Zone, first.ID), first.PrivateIPs[0], true)
	framework.Eventually(t, settle, first.PrivateDNSName+" initialised", framework.NodeMatches(cp.Client, first.PrivateDNSName, initialised))

	svc := framework.NewLoadBalancerService(ns, "joined", framework.WithAnnotation(string(annotation.LoadBalancerBackend), awsBackend),
		framework.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-target-node-labels", joinLabel+"=yes"))
	if _, err := framework.CreateService(ctx, cp.Client, svc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cp.Client.CoreV1().Services(ns).Delete(ctx, "joined", metav1.DeleteOptions{})
		framework.Eventually(t, settle, "Service gone", framework.ServiceGone(cp.Client, ns, "joined"))
		for _, n := range []string{first.PrivateDNSName, joining.PrivateDNSName} {
			_ = cp.Client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
	framework.Eventually(t, settle, "status carries the NLB's DNS name", framework.ServiceMatches(cp.Client, ns, "joined", ingressIsNLBOf("default/joined")))
	nodePort := serviceNodePort(ctx, t, cp, "joined")
	framework.Eventually(t, settle, "the first instance is the one target", instanceTargets("default/joined", fmt.Sprintf("%s:%d", first.ID, nodePort)))
	tg := targetGroupsOf("default/joined")[0].ARN
	calls := fake.CallCounts()

	// The joining node: registered by its kubelet with its labels, no
	// providerID yet. The load-balancer controller hands it to the backend
	// with the node batch, or with the next drift-repair pass (one every
	// repairPeriod here) if that comes first: once two passes began after
	// it joined, the load balancer was ensured with it.
	createJoinNode(ctx, t, cp, joining.PrivateDNSName, "", joining.PrivateIPs[0], false)
	passes := repairPasses(ctx)
	if passes < 0 {
		t.Fatal("the CCM's /metrics has no multicloud_ccm_load_balancer_repair_passes_total")
	}
	framework.Eventually(t, settle, "two drift-repair passes since the node joined", func(ctx context.Context) (bool, string, error) {
		n := repairPasses(ctx)
		return n >= passes+2, fmt.Sprintf("%v passes, %v before", n, passes), nil
	})
	framework.Eventually(t, settle, "the same target group, its one instance target", sameGroup("default/joined", tg, fmt.Sprintf("%s:%d", first.ID, nodePort)))

	// Initialised: its instance joins the same group.
	patch := fmt.Sprintf(`{"spec":{"providerID":"aws:///%s/%s"}}`, joining.Zone, joining.ID)
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, joining.PrivateDNSName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("%s:%d", first.ID, nodePort), fmt.Sprintf("%s:%d", joining.ID, nodePort)}
	slices.Sort(want)
	framework.Eventually(t, settle, "both instances targets of the same group", sameGroup("default/joined", tg, want...))

	after := fake.CallCounts()
	for _, op := range []string{"CreateTargetGroup", "DeleteTargetGroup", "ModifyListener"} {
		if n := after[op] - calls[op]; n != 0 {
			t.Errorf("%s called %d times while a node joined, want 0", op, n)
		}
	}
}

// createJoinNode creates a node selected by joinLabel, with an InternalIP,
// and the uninitialized taint if withTaint.
func createJoinNode(ctx context.Context, t *testing.T, cp *framework.ControlPlane, name, providerID, ip string, withTaint bool) {
	t.Helper()
	tweaks := []framework.NodeTweak{framework.WithLabel(joinLabel, "yes"),
		framework.WithAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})}
	if providerID != "" {
		tweaks = append(tweaks, framework.WithProviderID(providerID))
	}
	if !withTaint {
		tweaks = append(tweaks, framework.WithoutUninitializedTaint())
	}
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(name, tweaks...)); err != nil {
		t.Fatal(err)
	}
}

// repairPasses is the CCM's multicloud_ccm_load_balancer_repair_passes_total
// (-1 when it does not answer).
func repairPasses(ctx context.Context) float64 {
	code, body, err := ccm.Get(ctx, "/metrics")
	if err != nil || code != http.StatusOK {
		return -1
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "multicloud_ccm_load_balancer_repair_passes_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// targetGroupsOf returns the fake's target groups tagged for the Service.
func targetGroupsOf(service string) []awsfake.TargetGroupView {
	var out []awsfake.TargetGroupView
	for _, tg := range fake.TargetGroups() {
		if tg.Tags["kubernetes.io/service-name"] == service {
			out = append(out, tg)
		}
	}
	return out
}

// instanceTargets holds once the Service's NLB has one target group, of
// instance targets, whose targets are want ("id:port", sorted).
func instanceTargets(service string, want ...string) framework.Condition {
	return func(context.Context) (bool, string, error) {
		tgs := targetGroupsOf(service)
		seen := fmt.Sprintf("target groups %+v", tgs)
		return len(tgs) == 1 && tgs[0].TargetType == "instance" && slices.Equal(tgs[0].Targets, want), "want " + strings.Join(want, ",") + "; " + seen, nil
	}
}

// sameGroup is instanceTargets of the target group arn, the only one.
func sameGroup(service, arn string, want ...string) framework.Condition {
	targets := instanceTargets(service, want...)
	return func(ctx context.Context) (bool, string, error) {
		ok, seen, err := targets(ctx)
		return ok && targetGroupsOf(service)[0].ARN == arn, seen, err
	}
}
