package plan_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
)

// The four disagreements the cross-cloud differential
// (test/e2e/planswitch, TestPlanMatchesSwitchAcrossClouds) found between
// the plan and the switch (issue 43), each in process.

// TestPlanSeveralBackendsAddressShown: the bare-metal address planned for
// a Service served by aws and metal is shown to metal as taken, as the
// switch's informer shows it the Service's status: the next Service is
// planned another one (before, both were planned the same address).
func TestPlanSeveralBackendsAddressShown(t *testing.T) {
	w := newWorld(t)
	both := testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws,metal")
	_, got := w.planOf(t, nil, lbService("a", both), lbService("b", both), lbService("c"))
	var metal []string
	for _, name := range []string{"a", "b", "c"} {
		for _, a := range strings.Split(got[name].NewAddress, ",") {
			if strings.HasPrefix(a, "192.0.2.") {
				metal = append(metal, a)
			}
		}
	}
	if len(metal) != 3 || len(slices.Compact(slices.Sorted(slices.Values(metal)))) != 3 {
		t.Errorf("bare-metal addresses planned %v: want one each, all different", metal)
	}
}

// TestPlanDrainingLoadBalancerUpdated: a Service moving from aws to metal
// with a drain period keeps its NLB serving until the drain ends, and the
// switch's sync that starts the drain hands the draining backend the nodes
// of the sync (Balancer.retargetDraining; the node syncs after it keep it
// so): a node gone since the NLB was made has its target deregistered. The plan lists that call, named by backend and
// as happening while it drains, besides the drain itself (before: the
// drain only).
func TestPlanDrainingLoadBalancerUpdated(t *testing.T) {
	w := newWorld(t)
	svc := lbService("drained", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws"))
	w.ensureForReal(t, svc)
	svc.Annotations["multicloud-ccm.io/load-balancer-backends"] = "aws"
	svc.Annotations["multicloud-ccm.io/load-balancer-served-by"] = "aws"
	svc.Annotations["multicloud-ccm.io/load-balancer-backend"] = "metal"
	svc.Annotations["multicloud-ccm.io/load-balancer-drain"] = "10m"
	w.nodes = w.nodes[:2] // the third node is gone: its target is stale
	_, got := w.planOf(t, nil, svc)
	s := got["drained"]
	if s.Backend != "metal" || fmt.Sprint(s.DrainedFrom) != "[aws]" {
		t.Fatalf("drained: by %q, drained from %v; want metal, drained from aws", s.Backend, s.DrainedFrom)
	}
	i := slices.IndexFunc(s.Changes, func(in backends.Intent) bool {
		return strings.HasSuffix(in.Call, ":DeregisterTargets") && strings.HasPrefix(in.What, "in backend aws, while it drains: ")
	})
	if i < 0 {
		t.Errorf("changes %v: want the stale target deregistered from the NLB draining in aws", kinds(s.Changes))
	}
	if d := slices.IndexFunc(s.Changes, func(in backends.Intent) bool { return in.Kind == backends.IntentDelete }); d < i {
		t.Errorf("changes %v: the drain's delete is listed before the calls made while it drains", kinds(s.Changes))
	}
}

// TestPlanPartialRefusal: a Service of aws and metal that metal refuses
// (load-balancer-ips 0.0.0.0) is REFUSED (the sync fails and the plan
// exits 1), and, as the switch does, served by aws meanwhile: its NLB's
// creation is listed and its name is the address the status shows, and
// metal is named as the backend refusing it (before: no change, no
// address).
func TestPlanPartialRefusal(t *testing.T) {
	w := newWorld(t)
	svc := lbService("partial", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws,metal"),
		testutil.WithAnnotation("multicloud-ccm.io/load-balancer-ips", "0.0.0.0"))
	rep, got := w.planOf(t, nil, svc)
	s := got["partial"]
	created := slices.ContainsFunc(s.Changes, func(in backends.Intent) bool {
		return strings.HasSuffix(in.Call, ":CreateLoadBalancer") && strings.HasPrefix(in.What, "in backend aws: ")
	})
	if s.Outcome != plan.LBRefused || !strings.Contains(s.Error, "backend metal") || !created || !strings.Contains(s.NewAddress, ".dry-run.") {
		t.Errorf("partial: %s (%q), address %q, changes %v; want REFUSED by metal, the NLB in aws created and its name shown",
			s.Outcome, s.Error, s.NewAddress, kinds(s.Changes))
	}
	if fmt.Sprint(s.RefusedBy) != "[metal]" || s.Backend != "aws,metal" {
		t.Errorf("partial: refused by %v, backend %q; want refused by metal, backend aws,metal", s.RefusedBy, s.Backend)
	}
	if !rep.Summary.Failed() || rep.Summary.LBRefused != 1 {
		t.Errorf("summary %q: want 1 refused, the plan failing", rep.Summary)
	}
}

// TestPlanKeptLoadBalancerUpdatedWhileRefused: a Service served by aws
// moving to metal, which refuses it (load-balancer-ips 0.0.0.0), keeps its
// NLB serving (make before break), and the switch's failing sync hands it
// the nodes as they are (pkg/lbcontroller's retargetFailed): a node gone
// since the NLB was made has its target deregistered. The plan lists that
// call, named by backend and as made while the sync fails (before: no
// change of the kept NLB).
func TestPlanKeptLoadBalancerUpdatedWhileRefused(t *testing.T) {
	w := newWorld(t)
	svc := lbService("kept", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws"))
	w.ensureForReal(t, svc)
	svc.Annotations["multicloud-ccm.io/load-balancer-backends"] = "aws"
	svc.Annotations["multicloud-ccm.io/load-balancer-served-by"] = "aws"
	svc.Annotations["multicloud-ccm.io/load-balancer-backend"] = "metal"
	svc.Annotations["multicloud-ccm.io/load-balancer-ips"] = "0.0.0.0"
	w.nodes = w.nodes[:2] // the third node is gone: its target is stale
	_, got := w.planOf(t, nil, svc)
	s := got["kept"]
	if s.Outcome != plan.LBRefused || fmt.Sprint(s.RefusedBy) != "[metal]" {
		t.Fatalf("kept: %s (%q), refused by %v; want REFUSED by metal", s.Outcome, s.Error, s.RefusedBy)
	}
	if !slices.ContainsFunc(s.Changes, func(in backends.Intent) bool {
		return strings.HasSuffix(in.Call, ":DeregisterTargets") && strings.HasPrefix(in.What, "in backend aws, kept while the sync fails: ")
	}) {
		t.Errorf("changes %v: want the stale target deregistered from the NLB kept in aws", kinds(s.Changes))
	}
}

// TestPlanKeptLoadBalancerLeftWhileRefused: as
// TestPlanKeptLoadBalancerUpdatedWhileRefused, the Service also edited to
// aws-load-balancer-type external: the aws backend leaves it to another
// controller and changes nothing in AWS, not even the NLB it made, so the
// switch's update of the kept NLB (retargetFailed) changes nothing. The
// plan predicted the NLB's targets following the nodes all the same, and
// showed the backend's answer as an error ("updating the load balancers
// kept meanwhile: implemented by alternate to cloud provider"):
// TestPlanMatchesSwitchRandomWorldOnOpenStack, seed 1796541842655857086,
// s3. It predicts no targets there, no change and no error of that update.
func TestPlanKeptLoadBalancerLeftWhileRefused(t *testing.T) {
	w := newWorld(t)
	svc := lbService("kept", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws"))
	w.ensureForReal(t, svc)
	svc.Annotations["multicloud-ccm.io/load-balancer-backends"] = "aws"
	svc.Annotations["multicloud-ccm.io/load-balancer-served-by"] = "aws"
	delete(svc.Annotations, "multicloud-ccm.io/load-balancer-backend")
	svc.Annotations["multicloud-ccm.io/load-balancer-ips"] = "0.0.0.0"
	svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] = "external"
	w.nodes = w.nodes[:2]
	_, got := w.planOf(t, nil, svc)
	s := got["kept"]
	if s.Outcome != plan.LBRefused || fmt.Sprint(s.RefusedBy) != "[metal]" {
		t.Fatalf("kept: %s (%q), refused by %v; want REFUSED by metal", s.Outcome, s.Error, s.RefusedBy)
	}
	if _, ok := s.Targets["aws"]; ok || strings.Contains(s.Error, "kept meanwhile") || len(s.Changes) != 0 {
		t.Errorf("kept: targets %v, error %q, changes %v; want no targets in aws (the NLB left as it is), no error of its update, no change",
			s.Targets, s.Error, kinds(s.Changes))
	}
}

// TestPlanHandedOverInSeveral: of a Service's backends, aws leaves it to
// another controller (aws-load-balancer-type: external): it is served by
// metal only, as the switch marks it. One served by aws and metal before
// and so edited keeps its bare-metal address (adopted), its NLB's name
// leaves the status and the NLB is kept for the other controller: no
// delete, and the plan does not fail (before: served by "aws,metal", its
// address unchanged).
func TestPlanHandedOverInSeveral(t *testing.T) {
	w := newWorld(t)
	external := testutil.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-type", "external")
	edited := lbService("edited", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws"))
	w.ensureForReal(t, edited)
	// As the switch leaves it served by aws and metal: its bare-metal
	// address after the NLB's name.
	edited.Status.LoadBalancer.Ingress = append(edited.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: "192.0.2.9"})
	edited.Annotations["multicloud-ccm.io/load-balancer-backend"] = "aws,metal"
	edited.Annotations["multicloud-ccm.io/load-balancer-backends"] = "aws,metal"
	edited.Annotations["multicloud-ccm.io/load-balancer-served-by"] = "aws,metal"
	edited.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] = "external"
	fresh := lbService("fresh", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "metal,aws"), external)
	rep, got := w.planOf(t, nil, edited, fresh)

	var nlb, ip string
	for _, a := range strings.Split(got["edited"].Address, ",") {
		if strings.Contains(a, ".elb.") {
			nlb = a
		} else {
			ip = a
		}
	}
	e := got["edited"]
	if e.Backend != "metal" || e.Outcome != plan.LBAdopted || e.NewAddress != ip || nlb == "" || len(e.DeletedFrom)+len(e.DrainedFrom) != 0 {
		t.Errorf("edited (was %q): %s by %q, address %q, deleted from %v, drained from %v; want adopted by metal, address %q, nothing deleted",
			e.Address, e.Outcome, e.Backend, e.NewAddress, e.DeletedFrom, e.DrainedFrom, ip)
	}
	if slices.ContainsFunc(e.Changes, func(in backends.Intent) bool { return in.Kind == backends.IntentDelete }) {
		t.Errorf("edited: changes %v delete something; the NLB is kept for the other controller", kinds(e.Changes))
	}
	if fmt.Sprint(e.HandedOver) != "[aws]" {
		t.Errorf("edited: handed over %v, want [aws]", e.HandedOver)
	}
	if f := got["fresh"]; f.Backend != "metal" || f.Outcome != plan.LBCreated || !strings.HasPrefix(f.NewAddress, "192.0.2.") {
		t.Errorf("fresh: %s by %q, address %q; want created by metal, a pool address", f.Outcome, f.Backend, f.NewAddress)
	}
	if rep.Summary.Failed() {
		t.Errorf("summary %q fails: nothing is deleted, replaced or refused", rep.Summary)
	}
}

// TestPlanForgottenAddressLeaves: a Service served by aws and metal
// before, edited to metal alone and aws-load-balancer-type: external,
// leaves aws, which holds nothing for it (the NLB is the other
// controller's): the switch forgets aws, deletes nothing, and the NLB's
// name leaves the status. The plan said adopted, the address going
// unexplained (no delete, drain or hand-over); it names aws forgotten
// (TestPlanMatchesSwitchRandomWorldOnOpenStack, seed
// 1796238769743363392, s3: "planned adopted: the switch changed its
// addresses").
func TestPlanForgottenAddressLeaves(t *testing.T) {
	w := newWorld(t)
	left := lbService("left", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws"))
	w.ensureForReal(t, left)
	left.Status.LoadBalancer.Ingress = append(left.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: "192.0.2.9"})
	left.Annotations["multicloud-ccm.io/load-balancer-backend"] = "metal"
	left.Annotations["multicloud-ccm.io/load-balancer-backends"] = "aws,metal"
	left.Annotations["multicloud-ccm.io/load-balancer-served-by"] = "aws,metal"
	left.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] = "external"
	_, got := w.planOf(t, nil, left)
	l := got["left"]
	js, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if l.Outcome != plan.LBAdopted || l.NewAddress != "192.0.2.9" || len(l.DeletedFrom)+len(l.DrainedFrom)+len(l.HandedOver) != 0 || !strings.Contains(string(js), `"forgotten":["aws"]`) {
		t.Errorf("left: %s; want adopted by metal at 192.0.2.9, nothing deleted, drained or handed over, aws forgotten", js)
	}
}

// TestPlanSeveralBackendsInOrder: a Service of metal,aws is planned
// served by "metal,aws", the annotation's order, as the switch writes it
// in load-balancer-served-by (before: "aws,metal", the decision's targets
// sorted by name; TestPlanMatchesSwitchRandomWorld, seed
// 1796196368218856024).
func TestPlanSeveralBackendsInOrder(t *testing.T) {
	w := newWorld(t)
	_, got := w.planOf(t, nil, lbService("ordered", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "metal,aws")))
	s := got["ordered"]
	if s.Backend != "metal,aws" || !strings.HasPrefix(s.NewAddress, "192.0.2.") {
		t.Errorf("ordered: by %q, address %q; want by metal,aws, the bare-metal address first", s.Backend, s.NewAddress)
	}
}
