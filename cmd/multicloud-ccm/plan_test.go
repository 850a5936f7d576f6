package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clienttesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// planCluster is a cluster leaving MetalLB for a bare-metal backend: one
// Service keeps the address MetalLB gave it (in the pool), one shows an
// address outside the pool (it would be replaced), one has none yet (it
// would get one), one is another controller's class. The client refuses
// every write and counts them.
func planCluster(t *testing.T) (kubernetes.Interface, *[]string, string) {
	t.Helper()
	lb := func(name string, tweaks ...testutil.ServiceTweak) *corev1.Service {
		svc := testutil.NewService(name, tweaks...)
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
		return svc
	}
	status := func(ip string) testutil.ServiceTweak {
		return func(s *corev1.Service) { s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}} }
	}
	objs := []runtime.Object{
		lb("kept", status("192.0.2.5")),
		lb("outside", status("198.51.100.7")),
		lb("new", testutil.WithAnnotation("metallb.universe.tf/address-pool", "public")),
		lb("theirs", testutil.WithClass("metallb.io/metallb")),
		testutil.NewNode("bm-1", testutil.WithProviderID("baremetal://bm-1")),
	}
	client := testutil.NewClientset(objs...)
	var writes []string
	client.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "get", "list", "watch":
			return false, nil, nil
		}
		writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource)
		return true, nil, errors.New("read-only")
	})
	cfg := filepath.Join(t.TempDir(), "cloud-config.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: plan
loadBalancer:
  defaultBackend: metal
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: bm-1
      addresses: [{type: InternalIP, address: 10.0.0.11}]
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return client, &writes, cfg
}

func runPlan(t *testing.T, client kubernetes.Interface, args ...string) (string, error) {
	t.Helper()
	old := planClient
	planClient = func(string) (kubernetes.Interface, error) { return client, nil }
	t.Cleanup(func() { planClient = old })
	cmd := newPlanCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestPlanCommand runs `multicloud-ccm plan` on a cluster leaving MetalLB:
// the table names each node's and Service's backend and why, the address
// kept (adopted, 0 changes), the one outside the pool (REPLACED), the new
// one (created), MetalLB's class left alone and MetalLB's pool annotation
// unknown; the summary line counts them; the command fails (exit status 1)
// because of the replacement; nothing is written to the API server. -o
// json carries the same report.
func TestPlanCommand(t *testing.T) {
	client, writes, cfg := planCluster(t)
	out, err := runPlan(t, client, "--cloud-config", cfg)
	t.Log("\n" + out)
	if !errors.Is(err, errPlanFails) {
		t.Errorf("plan returned %v, want errPlanFails (exit status 1): a Service would be replaced", err)
	}
	for _, want := range []string{
		"bm-1   metal     scheme",
		"default/kept      metal     default",
		"adopted    0",
		"default/outside   metal     default",
		"REPLACED",
		"198.51.100.7 -> 192.0.2.",
		"default/new       metal     default",
		"created",
		"default/theirs    -         class metallb.io/metallb (not in loadBalancer.classes)   not ours",
		`annotation metallb.universe.tf/address-pool="public": unknown`,
		"1 nodes claimed, 0 would be deleted; 1 load balancers adopted, 1 created, 1 replaced; 2 changes; 1 annotations not honoured",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	if len(*writes) != 0 {
		t.Errorf("plan wrote to the API server: %v", *writes)
	}

	out, err = runPlan(t, client, "--cloud-config", cfg, "-o", "json")
	if !errors.Is(err, errPlanFails) {
		t.Errorf("plan -o json returned %v, want errPlanFails", err)
	}
	var rep plan.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if got := fmt.Sprint(rep.Summary); got != "1 nodes claimed, 0 would be deleted; 1 load balancers adopted, 1 created, 1 replaced; 2 changes; 1 annotations not honoured" {
		t.Errorf("-o json summary %q", got)
	}
}

// TestPlanCommandClean: with nothing to delete, replace or refuse, plan
// succeeds (exit status 0).
func TestPlanCommandClean(t *testing.T) {
	_, _, cfg := planCluster(t)
	clean := testutil.NewClientset(testutil.NewNode("bm-1", testutil.WithProviderID("baremetal://bm-1")))
	if _, err := runPlan(t, clean, "--cloud-config", cfg); err != nil {
		t.Errorf("plan of a clean cluster: %v, want success", err)
	}
}

// TestPlanCommandOtherCCMs (issue 45): with --cloud-provider-platforms
// naming the platforms the CCM serves, `plan` prints, for each Node of
// another platform, whose it is ("left to the CCM of platform ...") rather
// than refusing it (a tainted node another CCM initialises) or calling it
// unmanaged, counts them in the summary, and succeeds: nothing of ours
// would be deleted, replaced or refused.
func TestPlanCommandOtherCCMs(t *testing.T) {
	t.Cleanup(func() { router.SetPlatforms(nil) })
	_, _, cfg := planCluster(t)
	hc := testutil.NewNode("hc-1", testutil.Uninitialized)
	hc.Annotations = map[string]string{"cloudprovider.kubernetes.io/platform": "hcloud"}
	client := testutil.NewClientset(
		testutil.NewNode("bm-1", testutil.WithProviderID("baremetal://bm-1")),
		testutil.NewNode("ip-10-0-1-5", testutil.WithProviderID("aws:///eu-west-1a/i-0123456789abcdef0")),
		hc,
	)
	out, err := runPlan(t, client, "--cloud-config", cfg, "--cloud-provider-platforms", "baremetal")
	t.Log("\n" + out)
	if err != nil {
		t.Errorf("plan returned %v, want success: other CCMs' nodes are neither deleted nor refused", err)
	}
	for _, want := range []string{
		"ip-10-0-1-5   -         -           -          other CCM's   left to the CCM of platform aws",
		"hc-1          -         -           -          other CCM's   left to the CCM of platform hcloud",
		"1 nodes claimed, 0 would be deleted, 2 left to other CCMs;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q", want)
		}
	}
}

// TestPlanTablePartialRefusal: a Service some of its backends refuse is
// served by the others: the table shows its new address, the details name
// the refusing backends and those that leave it to another controller;
// one every backend refuses keeps its address.
func TestPlanTablePartialRefusal(t *testing.T) {
	var b strings.Builder
	printServicePlans(&b, []plan.ServicePlan{
		{Namespace: "default", Name: "partial", Backend: "aws,metal", Outcome: plan.LBRefused, NewAddress: "nlb-1.elb.example", RefusedBy: []string{"metal"}, HandedOver: []string{"aws2"}},
		{Namespace: "default", Name: "refused", Backend: "metal", Outcome: plan.LBRefused, Address: "192.0.2.9", RefusedBy: []string{"metal"}},
	})
	out := b.String()
	for _, want := range []string{"- -> nlb-1.elb.example", "refused by: metal", "left to another controller by: aws2"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "192.0.2.9 ->") {
		t.Errorf("a Service every backend refuses shows a new address:\n%s", out)
	}
}
