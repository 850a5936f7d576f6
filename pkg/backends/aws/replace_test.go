package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// startWithEvents is startAnnotatedWith on a backend whose Initialize got
// the clientset, so that its own events (replacements announced) are
// recorded beside the service controller's.
func startWithEvents(t *testing.T, prepare func(*env), svc *corev1.Service, check func(*env) error) *annotated {
	t.Helper()
	e := newEnv(t)
	prepare(e)
	client := testutil.NewClientset()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	e.cloud.Initialize(testutil.NewClientBuilder(client), stop)
	runServiceController(t, e.cloud, client)
	a := startAnnotatedOn(t, e, client, svc)
	eventually(t, "the NLB is created as the annotations ask", func() error { return check(e) })
	a.lbARN = e.onlyLB(t).ARN
	return a
}

// event waits for an event of the type and reason whose message contains
// every string in want.
func (a *annotated) event(eventType, reason string, want ...string) {
	a.t.Helper()
	eventually(a.t, fmt.Sprintf("a %s event %s containing %q", eventType, reason, want), func() error {
		evs, err := a.client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Type == eventType && ev.Reason == reason && containsAll(ev.Message, want) {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(evs.Items))
	})
}

// placedIn checks the only NLB's scheme and subnets.
func placedIn(scheme string, subnets ...string) func(*env) error {
	return func(e *env) error {
		lbs := e.fake.LoadBalancers()
		if len(lbs) != 1 {
			return fmt.Errorf("%d load balancers", len(lbs))
		}
		if lbs[0].Scheme != scheme || strings.Join(lbs[0].Subnets, ",") != strings.Join(subnets, ",") {
			return fmt.Errorf("load balancer %s in %v, want %s in %v", lbs[0].Scheme, lbs[0].Subnets, scheme, subnets)
		}
		return nil
	}
}

// lbSeenByEvents records, for each event with reason written to the
// API, whether the NLB arn was still there: an event announcing a
// replacement must be visible before the old NLB goes.
func lbSeenByEvents(a *annotated, reason, arn string) func() []bool {
	var mu sync.Mutex
	var seen []bool
	testutil.PrependReactor(a.client, "create", "events", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if ev, ok := action.(k8stesting.CreateAction).GetObject().(*corev1.Event); ok && ev.Reason == reason {
			there := slices.ContainsFunc(a.e.fake.LoadBalancers(), func(lb awsfake.LoadBalancerView) bool { return lb.ARN == arn })
			mu.Lock()
			seen = append(seen, there)
			mu.Unlock()
		}
		return false, nil, nil
	})
	return func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), seen...)
	}
}

// waitReplaced waits until the Service's NLB is another one than a.lbARN,
// shown in the Service's status and passing check, and makes it a's NLB.
func (a *annotated) waitReplaced(what string, check func(*env) error) {
	a.t.Helper()
	eventually(a.t, what, func() error {
		lb := a.e.fake.LoadBalancers()
		if len(lb) != 1 || lb[0].ARN == a.lbARN {
			return fmt.Errorf("not replaced yet (%d load balancers)", len(lb))
		}
		s, err := a.client.CoreV1().Services(a.svc.Namespace).Get(context.Background(), a.svc.Name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].Hostname != lb[0].DNSName {
			return fmt.Errorf("status %v (%w), want %s", s.Status.LoadBalancer.Ingress, err, lb[0].DNSName)
		}
		return check(a.e)
	})
	a.lbARN = a.e.onlyLB(a.t).ARN
}

// TestSchemeAndSubnetAnnotations drives aws-load-balancer-internal,
// -scheme and -subnets through the upstream service controller: an
// internal NLB in the internal subnets; bad values are a Warning naming the
// annotation and change nothing; a subnet in a new zone is added in place;
// a change AWS cannot make in place (another zone set, the scheme)
// replaces the NLB, announced by a LoadBalancerReplacing Warning before
// the old NLB is deleted; deleting the Service leaves nothing.
func TestSchemeAndSubnetAnnotations(t *testing.T) {
	addZoneC := func(e *env) {
		e.fake.AddSubnet(awsfake.Subnet{ID: "subnet-1c", VPCID: testVPC, Zone: testRegion + "c", ZoneID: "euw1-az3", CIDR: "10.0.12.0/24",
			Tags: map[string]string{tagRoleInternalELB: "1"}})
	}
	internal := map[annotation.Name]string{AnnotationInternal: "true"}
	a := startWithEvents(t, addZoneC, newService("web", withAnnotations(internal)), placedIn(schemeInternal, "subnet-1a", "subnet-1b", "subnet-1c"))
	a.resyncChangesNothing()

	for _, bad := range []struct {
		name string
		ann  map[annotation.Name]string
		want []string
	}{
		{"internal not a bool", map[annotation.Name]string{AnnotationInternal: "maybe"}, []string{string(AnnotationInternal), `must be "true" or "false"`}},
		// Upstream makes an NLB internal for any value but "false": a
		// false of another spelling must not replace it with an
		// internet-facing one.
		{"internal False", map[annotation.Name]string{AnnotationInternal: "False"}, []string{string(AnnotationInternal) + `="False"`, `any value but "false"`}},
		{"internal 0", map[annotation.Name]string{AnnotationInternal: "0"}, []string{string(AnnotationInternal) + `="0"`, `any value but "false"`}},
		{"scheme contradicting internal", map[annotation.Name]string{AnnotationInternal: "true", AnnotationScheme: schemeInternetFacing},
			[]string{string(AnnotationScheme) + `="internet-facing"`, "contradicts " + string(AnnotationInternal) + " (internal)"}},
		{"scheme unknown", map[annotation.Name]string{AnnotationScheme: "public"}, []string{string(AnnotationScheme), "one of internal, internet-facing"}},
		{"subnet unknown", map[annotation.Name]string{AnnotationInternal: "true", AnnotationSubnets: "subnet-1a,private-x"},
			[]string{string(AnnotationSubnets), "private-x is neither the ID nor the Name tag of a subnet"}},
		{"two subnets in one zone", map[annotation.Name]string{AnnotationInternal: "true", AnnotationSubnets: "subnet-1a,subnet-0a"},
			[]string{string(AnnotationSubnets), "both in zone " + testRegion + "a"}},
	} {
		a.refused(bad.name, bad.ann, bad.want...)
		if err := placedIn(schemeInternal, "subnet-1a", "subnet-1b", "subnet-1c")(a.e); err != nil {
			t.Errorf("%s changed the NLB: %v", bad.name, err)
		}
	}

	// The annotation dropping zone c from the running NLB is a
	// replacement. AWS refuses the first delete (the service controller
	// retries 5 s later), so the announcement is written while the old NLB
	// is there.
	old := a.e.onlyLB(t)
	seen := lbSeenByEvents(a, reasonReplacing, old.ARN)
	a.e.fake.FailNext("DeleteLoadBalancer", "AccessDenied")
	a.e.fake.ResetCalls()
	a.update(map[annotation.Name]string{AnnotationInternal: "true", AnnotationSubnets: "subnet-1a,subnet-1b"})
	a.waitReplaced("zone c dropped: the NLB replaced", placedIn(schemeInternal, "subnet-1a", "subnet-1b"))
	a.event(corev1.EventTypeWarning, reasonReplacing, old.Name, old.DNSName, string(AnnotationSubnets), "no longer wanted", "new DNS name")
	if s := seen(); len(s) == 0 || !s[0] {
		t.Errorf("old NLB there when LoadBalancerReplacing events were written: %v; want the first written before it went", s)
	}
	a.resyncChangesNothing()

	a.e.fake.ResetCalls()
	a.change("a subnet in a new zone is added in place", map[annotation.Name]string{AnnotationInternal: "true", AnnotationSubnets: "subnet-1a,subnet-1b,subnet-1c"},
		placedIn(schemeInternal, "subnet-1a", "subnet-1b", "subnet-1c"), "SetSubnets")

	old = a.e.onlyLB(t)
	a.update(nil)
	a.waitReplaced("annotations removed: an internet-facing NLB in the discovered subnets", placedIn(schemeInternetFacing, "subnet-0a", "subnet-0b"))
	a.event(corev1.EventTypeWarning, reasonReplacing, old.DNSName, "scheme internet-facing", string(AnnotationInternal))
	a.resyncChangesNothing()

	deleteService(t, a.client, "web")
	eventually(t, "nothing left in AWS", func() error {
		if n := a.e.fake.ResourceCount(); n != 0 {
			return fmt.Errorf("%d resources left", n)
		}
		return nil
	})
}

// TestTargetGroupReplacementAnnounced: a change of the target type, which
// AWS cannot make on a target group, moves the listener to a new group on
// the same NLB; a Normal event names the port and both groups first.
func TestTargetGroupReplacementAnnounced(t *testing.T) {
	svc := newService("web", withAnnotation(AnnotationTargetType, targetIP))
	n := namesFor(testCluster, svc)
	ipTG, instanceTG := n.targetGroup(80, "TCP", targetIP), n.targetGroup(80, "TCP", targetInstance)
	a := startWithEvents(t, func(*env) {}, svc, listenersAre("TCP:80->"+ipTG))
	a.change("instance targets", map[annotation.Name]string{AnnotationTargetType: targetInstance}, listenersAre("TCP:80->"+instanceTG),
		"CreateTargetGroup", "ModifyListener", "DeleteTargetGroup")
	a.event(corev1.EventTypeNormal, reasonTargetGroupsReplacing, "port 80 from "+ipTG+" to "+instanceTG, "DNS name stay")
	a.resyncChangesNothing()
	a.refused("target type lambda", map[annotation.Name]string{AnnotationTargetType: "lambda"}, string(AnnotationTargetType), "one of instance, ip")
	a.change("annotation removed: the automatic choice (ip without nodes)", nil, listenersAre("TCP:80->"+ipTG),
		"CreateTargetGroup", "ModifyListener", "DeleteTargetGroup")
}
