package aws

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// instanceGroupHas checks that the only NLB's port 80 forwards to the
// Service's instance target group, and that group's targets.
func instanceGroupHas(svc *corev1.Service, ids ...string) func(*env) error {
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	return func(e *env) error {
		lbs, tgs := e.fake.LoadBalancers(), e.fake.TargetGroups()
		if len(lbs) != 1 || len(tgs) != 1 {
			return fmt.Errorf("%d load balancers and %d target groups, want one each", len(lbs), len(tgs))
		}
		if got := strings.Join(lbs[0].Listeners, ","); got != "TCP:80->"+tg {
			return fmt.Errorf("listeners %s, want TCP:80->%s", got, tg)
		}
		var want []string
		for _, id := range ids {
			want = append(want, id+":30080")
		}
		if got := strings.Join(tgs[0].Targets, ","); tgs[0].TargetType != targetInstance || got != strings.Join(want, ",") {
			return fmt.Errorf("target group %s (%s) with targets %s, want instance targets %s", tgs[0].Name, tgs[0].TargetType, got, strings.Join(want, ","))
		}
		return nil
	}
}

// annotate sets one annotation on a Service read back from the clientset
// (its annotations may be nil).
func annotate(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

// TestGoneInstanceIsNoTarget: one instance terminated in a routine
// scale-in while its Node is still there is simply not a target: the next
// Ensure (an annotation edit, through the upstream service controller)
// deregisters it and nothing else; the Service keeps its instance target
// group, listener and the instances' rules. It used to switch the whole
// Service to IP targets (new groups, the listener moved, the instance
// group deleted) and back once the Node went.
func TestGoneInstanceIsNoTarget(t *testing.T) {
	e := newEnv(t, fastCache)
	nodes := e.awsNodes(1, 3)
	svc := newService("web")
	a := startDualStack(t, e, svc, instanceGroupHas(svc, instanceID(1), instanceID(2), instanceID(3)), nodes...)
	e.fake.SetInstanceState(instanceID(3), "terminated")
	a.changeService("an annotation edited after instance 3 terminated", annotate("example.com/edited", "1"),
		instanceGroupHas(svc, instanceID(1), instanceID(2)), "DeregisterTargets")
	a.updateNodes(nodes[:2]...)
	e.assertNoMutation(t, "the node sync once the Node of the gone instance is deleted")
}
