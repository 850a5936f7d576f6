package plan_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
)

// newWorld67b is newWorld with extra backends appended to the config.
func newWorld67b(t *testing.T, extra string) *world {
	t.Helper()
	f := awsfake.New(region)
	seeded := f.Seed(awsfake.SeedSpec{ClusterID: cluster, Instances: 3})
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Setenv("PLAN_AWS_KEY", "AKIDPLAN")
	t.Setenv("PLAN_AWS_SECRET", "plan-secret")
	raw := fmt.Sprintf(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: %s
loadBalancer:
  defaultBackend: metal
backends:
- name: aws
  type: aws
  aws:
    region: %s
    vpc: %s
    endpoints: {ec2: %q, elbv2: %q, sts: %q}
    credentials: {accessKeyID: {env: PLAN_AWS_KEY}, secretAccessKey: {env: PLAN_AWS_SECRET}}
    retry: {maxAttempts: 2, maxBackoff: 5ms}
    rateLimits:
      ec2: {qps: 10000, bucket: 10000, qpsWrite: 10000, bucketWrite: 10000}
      elbv2: {qps: 10000, bucket: 10000, qpsWrite: 10000, bucketWrite: 10000}
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - {name: bm-join, addresses: [{type: InternalIP, address: 10.0.0.50}]}
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28"]
`, cluster, region, seeded.VPCID, srv.URL, srv.URL, srv.URL) + extra
	cfg, err := config.Parse([]byte(raw), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{aws: f, seed: seeded, cfg: cfg}
	for _, in := range seeded.Instances {
		w.nodes = append(w.nodes, testutil.NewNode(in.PrivateDNSName, testutil.WithProviderID("aws:///"+in.Zone+"/"+in.ID),
			testutil.WithInternalIP(in.PrivateIPs[0]), testutil.WithLabel("multicloud-ccm.io/backend", "aws")))
	}
	return w
}

const metal2 = `- name: metal2
  type: baremetal
  baremetal:
    addressPools:
    - name: other
      addresses: ["198.51.100.0/28"]
`

func dump(t *testing.T, sp plan.ServicePlan) string {
	t.Helper()
	js, err := json.Marshal(sp)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

// P1: served by aws and metal (in both orders); moved to metal2, which
// refuses it (0.0.0.0), aws-load-balancer-type external: kept backends
// aws (left) and metal (its update fails on 0.0.0.0). aws must get no
// predicted targets whatever the order; differential with the switch.
func TestReview67bTwoKeptOneLeft(t *testing.T) {
	for _, order := range []string{"aws,metal", "metal,aws"} {
		for _, external := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/external=%v", order, external), func(t *testing.T) {
				w := newWorld67b(t, metal2)
				s := w.served(t, lbService("two", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", order)))[0]
				t.Logf("served-by %q backends %q", s.Annotations["multicloud-ccm.io/load-balancer-served-by"], s.Annotations["multicloud-ccm.io/load-balancer-backends"])
				s.Annotations["multicloud-ccm.io/load-balancer-backend"] = "metal2"
				s.Annotations["multicloud-ccm.io/load-balancer-ips"] = "0.0.0.0"
				if external {
					s.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] = "external"
				}
				w.nodes = w.nodes[:2]
				rep, got := w.planOf(t, nil, s)
				sp := got["two"]
				t.Logf("json: %s", dump(t, sp))
				t.Logf("summary: %s failed=%v", rep.Summary, rep.Summary.Failed())
				if sp.Outcome != plan.LBRefused || fmt.Sprint(sp.RefusedBy) != "[metal2]" {
					t.Errorf("want REFUSED by metal2: %s %v", sp.Outcome, sp.RefusedBy)
				}
				if _, ok := sp.Targets["aws"]; ok == external {
					t.Errorf("external=%v: targets %v (aws present=%v)", external, sp.Targets, ok)
				}
				w.compare(t, w.objects(s), true)
			})
		}
	}
}

// P2: served by aws; moved to aws,metal... not possible (aws a target).
// Served by aws; now metal2,metal? Instead: target hands over while a kept
// backend is left: served by aws, now backend "metal" only is refused; the
// handed-over target: served by metal2; now aws,metal: aws hands over
// (external), metal refuses (0.0.0.0), metal2 kept (its update fails on
// 0.0.0.0 too).
func TestReview67bHandedOverTargetAndKept(t *testing.T) {
	w := newWorld67b(t, metal2)
	s := w.served(t, lbService("ho", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws")))[0]
	s.Annotations["multicloud-ccm.io/load-balancer-backend"] = "metal2,aws"
	s.Annotations["multicloud-ccm.io/load-balancer-ips"] = "0.0.0.0"
	s.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] = "external"
	w.nodes = w.nodes[:2]
	rep, got := w.planOf(t, nil, s)
	sp := got["ho"]
	t.Logf("json: %s", dump(t, sp))
	t.Logf("summary: %s failed=%v", rep.Summary, rep.Summary.Failed())
	if _, ok := sp.Targets["aws"]; ok {
		t.Errorf("targets %v: aws hands over", sp.Targets)
	}
	if fmt.Sprint(sp.RefusedBy) != "[metal2]" {
		t.Errorf("refusedBy %v, handedOver %v: aws hands the Service over (ImplementedElsewhere), it does not refuse it; want refusedBy [metal2]", sp.RefusedBy, sp.HandedOver)
	}
	w.compare(t, w.objects(s), true)
}

// P3: summary / exit status for the commit's scenario: 1 refused, no
// deleted, no changes counted for the left kept NLB; JSON has no targets.
func TestReview67bSummaryAndJSON(t *testing.T) {
	w := newWorld(t)
	s := keptWhileRefused(t, w, map[string]string{"service.beta.kubernetes.io/aws-load-balancer-type": "external"})
	rep, got := w.planOf(t, nil, s)
	sp := got["kept"]
	js := dump(t, sp)
	t.Logf("json: %s", js)
	t.Logf("summary: %s failed=%v %+v", rep.Summary, rep.Summary.Failed(), rep.Summary)
	if rep.Summary.LBRefused != 1 || rep.Summary.LBDeleted != 0 || rep.Summary.LBChanges != 0 || !rep.Summary.Failed() {
		t.Errorf("summary %+v: want 1 refused, 0 deleted, 0 changes, failed", rep.Summary)
	}
	if strings.Contains(js, `"targets"`) || strings.Contains(js, "deletedFrom") || strings.Contains(js, "drainedFrom") {
		t.Errorf("json %s: want no targets, nothing deleted or drained", js)
	}
	if !strings.Contains(js, `"refusedBy":["metal"]`) {
		t.Errorf("json %s: want refusedBy metal", js)
	}
}

// P4: served-by empty (a Service with an NLB recorded only in backends, or
// made by upstream): the plan runs no update; compare with the switch.
func TestReview67bServedByEmpty(t *testing.T) {
	for _, external := range []bool{true, false} {
		t.Run(fmt.Sprint("external=", external), func(t *testing.T) {
			w := newWorld(t)
			s := keptWhileRefused(t, w, nil)
			delete(s.Annotations, "multicloud-ccm.io/load-balancer-served-by")
			if external {
				s.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] = "external"
			}
			_, got := w.planOf(t, nil, s)
			t.Logf("json: %s", dump(t, got["kept"]))
			w.compare(t, w.objects(s), true)
		})
	}
}

// P5: a drain in progress at the same time: served by metal after a move
// from aws with a 10m drain (aws draining), then metal refuses (0.0.0.0),
// with and without external.
func TestReview67bDrainingAndRefused(t *testing.T) {
	for _, external := range []bool{true, false} {
		t.Run(fmt.Sprint("external=", external), func(t *testing.T) {
			w := newWorld(t)
			s := w.served(t, lbService("dr", toAWS))[0]
			s.Annotations["multicloud-ccm.io/load-balancer-backend"] = "metal"
			s.Annotations["multicloud-ccm.io/load-balancer-drain"] = "10m"
			s = w.served(t, s)[0]
			t.Logf("after drain start: served-by %q draining %q", s.Annotations["multicloud-ccm.io/load-balancer-served-by"], s.Annotations["multicloud-ccm.io/load-balancer-draining"])
			s.Annotations["multicloud-ccm.io/load-balancer-ips"] = "0.0.0.0"
			if external {
				s.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] = "external"
			}
			w.nodes = w.nodes[:2]
			rep, got := w.planOf(t, nil, s)
			sp := got["dr"]
			t.Logf("json: %s", dump(t, sp))
			t.Logf("summary: %s", rep.Summary)
			if _, ok := sp.Targets["aws"]; ok == external {
				t.Errorf("external=%v: targets %v", external, sp.Targets)
			}
			w.compare(t, w.objects(s), true)
		})
	}
}
