package aws

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Review probes (65c) of 8b51025: a node sync handed another version of
// the Service than the one the NLB was last reconciled for changes only
// targets (specStale, retargetKeepingShape), "the nodes d chose".

// TestReview65cStaleNodeSyncRevertsTargetNodeLabels: the user narrowed
// web's targets to the nodes labelled pool=web
// (aws-load-balancer-target-node-labels), to take node 3 out of its
// traffic, and the worker's Ensure deregistered node 3. Upstream's node
// sync, listed before the edit, hands the old version with node 4
// (labelled pool=web) joining. The fix keeps the NLB's shape but takes
// the targets from the stale version: node 3 is registered again, against
// the edit the NLB was last reconciled for, and stays so until the next
// Ensure or repair pass (upstream records the node set it handed, so no
// node sync comes again before the next node change; never with
// --load-balancer-resync-period=0). The operator expects node 4
// registered and node 3 left out. Once with the Service's verified view
// (the node sync right after the Ensure: retargetVerified), once without
// (retargetKeepingShape).
func TestReview65cStaleNodeSyncRevertsTargetNodeLabels(t *testing.T) {
	for _, view := range []bool{true, false} {
		name := "with the verified view"
		if !view {
			name = "without a view"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			nodes := e.awsNodes(1, 4)
			for i, n := range nodes {
				if i != 2 { // node 3 is not in the pool
					n.Labels["pool"] = "web"
				}
			}
			before := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
			e.ensure(t, before, nodes[:3])
			after := before.DeepCopy()
			after.Annotations[string(AnnotationTargetNodeLabels)] = "pool=web"
			e.ensure(t, after, nodes[:3])
			tg := listenerTo(t, e, "80")
			if got, want := review65bTargets(t, e, tg), []string{instanceID(1) + ":30080", instanceID(2) + ":30080"}; !slices.Equal(got, want) {
				t.Fatalf("setup: targets after the Ensure of pool=web %v, want %v", got, want)
			}
			lbi, _ := e.cloud.LoadBalancer()
			if !view {
				e.cloud.lb.verified.drop(namesFor(testCluster, after))
			}
			e.fake.ResetCalls()
			if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, before, nodes); err != nil {
				t.Fatalf("node sync with the version from before the edit: %v", err)
			}
			got := review65bTargets(t, e, tg)
			if !slices.Contains(got, instanceID(4)+":30080") {
				t.Errorf("node 4 (labelled pool=web) joining is not registered: targets %v", got)
			}
			if slices.Contains(got, instanceID(3)+":30080") {
				t.Errorf("the node sync handed the version from before target-node-labels=pool=web registered node 3 again (the NLB was last reconciled for pool=web): targets %v, mutating calls %v",
					got, e.fake.MutatingCalls())
			}
		})
	}
}

// TestReview65cKeepShapeNodeSyncCalls counts the AWS calls of a node sync
// handed a stale version (a three-port Service, instance targets with the
// rules managed, one node joining) against those of the same node sync
// handed the current version without a view (the fast path): the
// keep-shape path reads each group's targets as the fast path does, and
// costs at most the security-group reads the fast path's rulesMove makes
// for the joining instance. A regression would show as reads per group or
// per node. Passes if the keep-shape path costs no more than the fast
// path plus 2 calls.
func TestReview65cKeepShapeNodeSyncCalls(t *testing.T) {
	run := func(stale bool) (map[string]int, int) {
		e := newEnv(t)
		nodes := e.awsNodes(1, 8)
		before := newService("web", withAnnotation(AnnotationTargetType, targetInstance), withAnnotation(AnnotationManageBackendSGRules, "true"),
			withPort("b", corev1.ProtocolTCP, 81, 30081), withPort("c", corev1.ProtocolTCP, 82, 30082))
		e.ensure(t, before, nodes[:7])
		after := before.DeepCopy()
		after.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
		e.ensure(t, after, nodes[:7])
		e.cloud.lb.verified.drop(namesFor(testCluster, after))
		handed := after
		if stale {
			handed = before
		}
		lbi, _ := e.cloud.LoadBalancer()
		e.fake.ResetCalls()
		if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, handed, nodes); err != nil {
			t.Fatalf("node sync (stale %v): %v", stale, err)
		}
		return e.fake.CallCounts(), e.fake.TotalCalls()
	}
	fastCalls, fast := run(false)
	keptCalls, kept := run(true)
	t.Logf("fast path %d calls %v; keep-shape path %d calls %v", fast, fastCalls, kept, keptCalls)
	if kept > fast+2 {
		t.Errorf("the keep-shape node sync made %d AWS calls %v, the fast path %d %v", kept, keptCalls, fast, fastCalls)
	}
}
