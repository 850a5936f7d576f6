package plan_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
)

// planOf runs the plan over w's nodes and the Services, with w's config,
// and returns the report and the Services' plans by name.
func (w *world) planOf(t *testing.T, cfg *config.CloudConfig, svcs ...*corev1.Service) (*plan.Report, map[string]plan.ServicePlan) {
	t.Helper()
	objs := []runtime.Object{}
	for _, n := range w.nodes {
		objs = append(objs, n)
	}
	for _, s := range svcs {
		objs = append(objs, s)
	}
	if cfg == nil {
		cfg = w.cfg
	}
	rep, err := plan.Run(t.Context(), plan.Options{Config: cfg, Client: newReadOnly(objs...)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]plan.ServicePlan{}
	for _, s := range rep.Services {
		out[s.Name] = s
		t.Logf("%s: %s by %q (%s), changes %+v, annotations %+v, error %q", s.Name, s.Outcome, s.Backend, s.ChosenBy, s.Changes, s.Annotations, s.Error)
	}
	t.Logf("summary: %s", rep.Summary)
	return rep, out
}

func kinds(in []backends.Intent) []string {
	var out []string
	for _, i := range in {
		out = append(out, string(i.Kind)+" "+i.Call)
	}
	return out
}

// TestPlanMoveDeletes (defect 1): a Service moving from aws to metal has
// its NLB deleted; the summary counts that delete and the plan fails, as
// docs/plan.md promises (exit 1 when something would be deleted). With a
// drain period the delete comes after the drain: still a delete.
func TestPlanMoveDeletes(t *testing.T) {
	for _, drain := range []string{"", "5m"} {
		t.Run("drain="+drain, func(t *testing.T) {
			w := newWorld(t)
			svc := lbService("moving", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws"))
			w.ensureForReal(t, svc)
			svc.Annotations["multicloud-ccm.io/load-balancer-backend"] = "metal"
			if drain != "" {
				svc.Annotations["multicloud-ccm.io/load-balancer-drain"] = drain
			}
			rep, got := w.planOf(t, nil, svc)
			s := got["moving"]
			deletes := 0
			for _, in := range s.Changes {
				if in.Kind == backends.IntentDelete {
					deletes++
					if !strings.HasPrefix(in.What, "in backend aws: ") {
						t.Errorf("delete %+v does not name backend aws", in)
					}
				}
			}
			if s.Backend != "metal" || deletes != 1 || fmt.Sprint(s.DeletedFrom, s.DrainedFrom) != map[string]string{"": "[aws] []", "5m": "[] [aws]"}[drain] {
				t.Errorf("moving: backend %q, changes %v; want metal and the NLB in aws deleted once", s.Backend, kinds(s.Changes))
			}
			if rep.Summary.LBDeleted != 1 || !strings.Contains(rep.Summary.String(), "1 deleted") {
				t.Errorf("summary %q (%d deleted), want 1 load balancer deleted", rep.Summary, rep.Summary.LBDeleted)
			}
			if !rep.Summary.Failed() {
				t.Error("a plan deleting a load balancer does not fail")
			}
		})
	}
}

// TestPlanSeveralBackends (defect 2): a Service served by aws and metal
// at once is planned as served by both, in the annotation's order, with
// both backends' changes named by backend; an aws annotation on it is
// honoured (aws serves it), and an OpenStack one is not, naming both.
func TestPlanSeveralBackends(t *testing.T) {
	w := newWorld(t)
	svc := lbService("both", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws,metal"),
		testutil.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval", "10"),
		testutil.WithAnnotation("loadbalancer.openstack.org/keep-floatingip", "true"))
	_, got := w.planOf(t, nil, svc)
	s := got["both"]
	if s.Backend != "aws,metal" || s.Outcome != plan.LBCreated {
		t.Errorf("both: %s by %q, want created by aws,metal", s.Outcome, s.Backend)
	}
	seen := map[string]bool{}
	for _, in := range s.Changes {
		switch {
		case strings.HasPrefix(in.What, "in backend aws: "):
			if seen["metal"] {
				t.Errorf("aws's change %q after metal's: not in the annotation's order", in.What)
			}
			seen["aws"] = true
		case strings.HasPrefix(in.What, "in backend metal: "):
			seen["metal"] = true
		default:
			t.Errorf("change %q names no backend", in.What)
		}
	}
	if !seen["aws"] || !seen["metal"] {
		t.Errorf("changes %v: want both backends' creates", kinds(s.Changes))
	}
	if len(s.Annotations) != 1 || s.Annotations[0].Annotation != "loadbalancer.openstack.org/keep-floatingip" ||
		s.Annotations[0].Problem != plan.AnnotationNotHonoured || !strings.Contains(s.Annotations[0].Detail, `["aws" "metal"]`) {
		t.Errorf("annotations %+v: want only OCCM's keep-floatingip, not honoured by aws and metal", s.Annotations)
	}
}

// TestPlanHandedOver (defect 3's plan side, and the "why" of
// ImplementedElsewhere): a Service the aws backend leaves to another
// controller (aws-load-balancer-type: external, docs/aws.md) is not ours,
// says why with the annotation, makes no change and does not fail the
// plan; a Service nothing routes to us keeps its own why.
func TestPlanHandedOver(t *testing.T) {
	w := newWorld(t)
	ext := lbService("external", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws"),
		testutil.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-type", "external"))
	rep, got := w.planOf(t, nil, ext)
	s := got["external"]
	want := "annotation: backend aws leaves it to another controller (annotation service.beta.kubernetes.io/aws-load-balancer-type=external)"
	if s.Outcome != plan.LBElsewhere || s.ChosenBy != want || len(s.Changes) != 0 {
		t.Errorf("external: %s (%s), %d changes; want %s (%s), 0 changes", s.Outcome, s.ChosenBy, len(s.Changes), plan.LBElsewhere, want)
	}
	if rep.Summary.Failed() {
		t.Errorf("summary %q fails on a Service left to another controller", rep.Summary)
	}
}

// TestPlanIgnoredAnnotation (defect 4): a health-check path the aws
// backend does not read (the health check is TCP) is not reported
// malformed; with externalTrafficPolicy Local (an HTTP health check) the
// same value is.
func TestPlanIgnoredAnnotation(t *testing.T) {
	w := newWorld(t)
	aws := testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws")
	path := testutil.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-healthcheck-path", "healthz")
	tcp := lbService("tcp", aws, path)
	local := lbService("local", aws, path, testutil.WithLocalTraffic(32000))
	_, got := w.planOf(t, nil, tcp, local)
	if a := got["tcp"].Annotations; len(a) != 0 {
		t.Errorf("tcp: annotations %+v; the backend ignores the path of a TCP health check", a)
	}
	if a := got["local"].Annotations; len(a) != 1 || a[0].Problem != plan.AnnotationMalformed {
		t.Errorf("local: annotations %+v; want the path malformed (HTTP health check)", a)
	}
	if s := got["local"]; s.Outcome != plan.LBRefused {
		t.Errorf("local: %s, want %s (the backend refuses the path)", s.Outcome, plan.LBRefused)
	}
}

// TestPlanDualStackGains: a PreferDualStack Service holding its IPv4
// address gains an IPv6 one from the pool: an address added, not a
// replacement (its IPv4 address stays), so the plan does not fail.
func TestPlanDualStackGains(t *testing.T) {
	w := newWorld(t)
	cfg, err := config.Parse([]byte(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: plan
loadBalancer:
  defaultBackend: metal
backends:
- name: metal
  type: baremetal
  baremetal:
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28", "2001:db8::/124"]
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	policy := corev1.IPFamilyPolicyPreferDualStack
	svc := lbService("dual", func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &policy
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.5"}}
	})
	w.nodes = nil
	rep, got := w.planOf(t, cfg, svc)
	s := got["dual"]
	if s.Outcome == plan.LBReplaced || !strings.HasPrefix(s.NewAddress, "192.0.2.5,2001:db8::") {
		t.Errorf("dual: %s, %s -> %s; want 192.0.2.5 kept, an IPv6 address added, not replaced", s.Outcome, s.Address, s.NewAddress)
	}
	if rep.Summary.Failed() {
		t.Errorf("summary %q fails on an address added", rep.Summary)
	}
}

// TestPlanGoneButReady: upstream's node-lifecycle controller asks the
// cloud only about Nodes that are not Ready: a Ready Node whose instance
// is gone is not deleted now but the first time it is not Ready; the plan
// says so (and fails), and a NotReady one would be deleted.
func TestPlanGoneButReady(t *testing.T) {
	w := newWorld(t)
	w.aws.RemoveInstance(w.seed.Instances[0].ID)
	w.aws.RemoveInstance(w.seed.Instances[1].ID)
	w.nodes[0].Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	testutil.NotReady(w.nodes[1])
	rep, _ := w.planOf(t, nil)
	got := map[string]string{}
	for _, n := range rep.Nodes {
		got[n.Name] = n.Outcome
	}
	if o := got[w.nodes[0].Name]; o != plan.NodeGoneReady {
		t.Errorf("Ready node whose instance is gone: %s, want %s", o, plan.NodeGoneReady)
	}
	if o := got[w.nodes[1].Name]; o != plan.NodeDeleted {
		t.Errorf("NotReady node whose instance is gone: %s, want %s", o, plan.NodeDeleted)
	}
	if s := rep.Summary; s.NodesDeleted != 1 || s.NodesGoneReady != 1 || !s.Failed() || !strings.Contains(s.String(), "1 deleted when not Ready") {
		t.Errorf("summary %q (failed %v)", s, s.Failed())
	}
}
