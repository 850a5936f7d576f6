// Package planswitch is the plan/switch differential through the built
// binary (issue 43): `multicloud-ccm plan` against a real kube-apiserver
// and a bare-metal backend, then the CCM started on the same cluster with
// the same cloud-config, and every prediction checked against what the CCM
// did, the way Terraform checks a plan against its apply.
//
// Claimed nodes: one initialised before (by the CCM being replaced) keeps
// its providerID; one still tainted is initialised with the planned
// providerID and its backend's label.
//
// The same differential over the AWS wire fake, vcsim, bare metal and Octavia
// (clouds_test.go: a table of migration paths and a world drawn from a
// seed) runs each world on a control plane of its own; world_test.go
// builds a world, switch_test.go checks the switch against the plan.
package planswitch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

var suite framework.Shared

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

// ns holds the test's Services.
const ns = "planswitch"

// cloudConfig is a bare-metal backend, the default for classless
// Services, owning machines ps-1 and ps-2 and the pool 192.0.2.0/28.
const cloudConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: planswitch
loadBalancer:
  defaultBackend: metal
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: ps-1
      addresses: [{type: InternalIP, address: 10.0.0.11}]
    - name: ps-2
      addresses: [{type: InternalIP, address: 10.0.0.12}]
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28"]
`

var pool = netip.MustParsePrefix("192.0.2.0/28")

// settle bounds how long the CCM may take to act on the cluster.
const settle = 60 * time.Second

// cluster creates what a cluster leaving MetalLB holds: a node of ours
// with its providerID, one announcing its backend by label (it gets its
// providerID), a NotReady node whose machine left the inventory, a node of
// another CCM (KEP-5778 annotation); a Service keeping the pool address
// MetalLB gave it, one with an address outside the pool, one without any,
// one requesting an address, one requesting an address no backend can
// serve, and one of MetalLB's class.
func cluster(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	hcloud := func(n *corev1.Node) {
		n.Annotations = map[string]string{"cloudprovider.kubernetes.io/platform": "hcloud"}
	}
	for _, n := range []*corev1.Node{
		framework.NewNode("ps-1", framework.WithProviderID("baremetal://ps-1"), framework.WithoutUninitializedTaint()),
		framework.NewNode("ps-2", framework.WithLabel(string(annotation.NodeBackend), "metal")),
		framework.NewNode("gone-1", framework.WithProviderID("baremetal://gone-1"), framework.WithoutUninitializedTaint(), framework.WithReady(corev1.ConditionFalse)),
		framework.NewNode("hc-1", hcloud),
	} {
		if _, err := framework.CreateNode(ctx, c, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		svc    *corev1.Service
		status string
	}{
		{framework.NewLoadBalancerService(ns, "kept"), "192.0.2.5"},
		{framework.NewLoadBalancerService(ns, "outside"), "198.51.100.7"},
		{framework.NewLoadBalancerService(ns, "fresh"), ""},
		{framework.NewLoadBalancerService(ns, "requested", framework.WithAnnotation(string(annotation.LoadBalancerIPs), "192.0.2.9")), ""},
		{framework.NewLoadBalancerService(ns, "bad", framework.WithAnnotation(string(annotation.LoadBalancerIPs), "0.0.0.0")), ""},
		{framework.NewLoadBalancerService(ns, "theirs", framework.WithLoadBalancerClass("metallb.io/metallb")), "192.0.2.12"},
	} {
		created, err := framework.CreateService(ctx, c, s.svc)
		if err != nil {
			t.Fatal(err)
		}
		if s.status == "" {
			continue
		}
		created.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: s.status}}
		if _, err := c.CoreV1().Services(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// runPlan runs the built binary's plan on the cluster, with env added to
// its environment (the clouds' credentials), and returns its report and
// exit status.
func runPlan(t *testing.T, cp *framework.ControlPlane, cfg string, env ...string) (*plan.Report, int) {
	t.Helper()
	cmd := exec.Command(cp.Binaries.CCM, "plan", "--cloud-config", cfg, "--kubeconfig", cp.AdminKubeconfig, "--cluster-name", "e2e", "-o", "json") //nolint:gosec // the binary under test.
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := 0
	var exit *exec.ExitError
	if err := cmd.Run(); errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep plan.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("plan -o json: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	return &rep, code
}

// TestPlanMatchesSwitchThroughBinary: the plan of the built binary, then
// the switch (the same binary as the CCM, same cluster, same cloud-config),
// compared one for one. Per Service: adopted means the status keeps its
// address; created and REPLACED mean a pool address appears (the requested
// one exactly; automatically assigned ones are compared as a set, for the
// CCM syncs four Services at once and the allocator hands addresses out in
// the order it is asked); REFUSED means no address and a Warning event
// carrying the plan's error; not ours means nothing written. Per Node:
// claimed means initialised by the planned backend with the planned
// providerID; WOULD BE DELETED means deleted; another CCM's means left
// tainted and unlabelled. And the exit status is 1 exactly because the
// switch deleted, replaced or refused something.
func TestPlanMatchesSwitchThroughBinary(t *testing.T) {
	cp := suite.ControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cluster(ctx, t, cp.Client)
	cfg := filepath.Join(t.TempDir(), "cloud-config.yaml")
	if err := os.WriteFile(cfg, []byte(cloudConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, code := runPlan(t, cp, cfg)
	t.Logf("plan (exit %d): %s", code, rep.Summary)

	ccm := cp.StartCCMT(t, framework.CCMOptions{CloudConfig: cloudConfig})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(ccm.Logs(framework.LogLines))
		}
	})
	var disruptive []string
	for _, n := range rep.Nodes {
		if what := checkNode(t, cp.Client, n); what != "" {
			disruptive = append(disruptive, what)
		}
	}
	var planned, got []string
	for _, s := range rep.Services {
		p, g, what := checkService(t, cp.Client, s)
		planned, got = append(planned, p...), append(got, g...)
		if what != "" {
			disruptive = append(disruptive, what)
		}
	}
	slices.Sort(planned)
	slices.Sort(got)
	if !slices.Equal(planned, got) {
		t.Errorf("automatically assigned addresses: planned %v, the switch gave %v", planned, got)
	}
	if want := len(rep.Nodes) == 4 && len(rep.Services) == 6; !want {
		t.Errorf("planned %d nodes and %d Services, want 4 and 6", len(rep.Nodes), len(rep.Services))
	}
	if (code == 1) != (len(disruptive) > 0) || (code != 0 && code != 1) {
		t.Errorf("plan exit status %d; the switch %s", code, describe(disruptive))
	}
	t.Logf("the switch: %s", describe(disruptive))
}

func describe(disruptive []string) string {
	if len(disruptive) == 0 {
		return "deleted, replaced and refused nothing"
	}
	return strings.Join(disruptive, "; ")
}

// checkNode waits until the switch did to the node what the plan said and
// returns what it did that makes the plan fail ("" for nothing).
func checkNode(t *testing.T, c kubernetes.Interface, n plan.NodePlan) string {
	t.Helper()
	switch n.Outcome {
	case plan.NodeClaimed:
		// A node initialised before (by the CCM being replaced) keeps its
		// providerID and labels: upstream initialises only tainted nodes.
		providerID, initialised := n.ProviderID, n.NewProviderID == ""
		if !initialised {
			providerID = n.NewProviderID
		}
		framework.Eventually(t, settle, "node "+n.Name+" served by "+n.Backend, framework.NodeMatches(c, n.Name, func(node *corev1.Node) (bool, string) {
			label := node.Labels[string(annotation.NodeBackend)]
			ok := node.Spec.ProviderID == providerID && !tainted(node) && (label == n.Backend || (initialised && label == ""))
			return ok, fmt.Sprintf("providerID %q (planned %q), labels %v, taints %v", node.Spec.ProviderID, providerID, node.Labels, node.Spec.Taints)
		}))
		return ""
	case plan.NodeDeleted:
		framework.Eventually(t, settle, "node "+n.Name+" deleted", framework.NodeGone(c, n.Name))
		return "node " + n.Name + " deleted"
	case plan.NodeOtherCCM:
		// Shown after the claimed nodes were initialised: the cloud-node
		// controller has run; this one it leaves to its own CCM.
		node, err := c.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		if err != nil || !tainted(node) || node.Labels[string(annotation.NodeBackend)] != "" || node.Spec.ProviderID != "" {
			t.Errorf("node %s (left to the CCM of platform %s): %v, %+v", n.Name, n.Platform, err, node)
		}
		return ""
	}
	t.Errorf("node %s: outcome %q not expected in this cluster (%s)", n.Name, n.Outcome, n.Error)
	return ""
}

// tainted reports whether the node still carries the uninitialized taint.
func tainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == framework.UninitializedTaint })
}

// checkService waits until the switch did to the Service what the plan
// said. It returns the automatically assigned addresses planned and given
// (to be compared as sets), and what the switch did that makes the plan
// fail.
func checkService(t *testing.T, c kubernetes.Interface, s plan.ServicePlan) (planned, got []string, disruptive string) {
	t.Helper()
	name := s.Namespace + "/" + s.Name
	switch s.Outcome {
	case plan.LBAdopted:
		addr := waitAddress(t, c, s, func(a string) bool { return a == s.Address })
		if addr != s.NewAddress || len(s.Changes) != 0 {
			t.Errorf("%s adopted: planned %q with %d changes, the switch shows %q", name, s.NewAddress, len(s.Changes), addr)
		}
	case plan.LBCreated, plan.LBReplaced:
		addr := waitAddress(t, c, s, func(a string) bool { return a != "" && a != s.Address })
		if len(s.Changes) == 0 {
			t.Errorf("%s %s with no change planned", name, s.Outcome)
		}
		if requested := s.Name == "requested"; requested && addr != s.NewAddress {
			t.Errorf("%s: planned %q, the switch gave %q", name, s.NewAddress, addr)
		} else if !requested {
			planned, got = []string{s.NewAddress}, []string{addr}
		}
		if s.Outcome == plan.LBReplaced {
			disruptive = name + " replaced (" + s.Address + " -> " + addr + ")"
		}
	case plan.LBRefused:
		framework.Eventually(t, settle, name+" refused with the plan's error", refusedWith(c, s))
		disruptive = name + " refused"
	case plan.LBElsewhere:
		svc, err := c.CoreV1().Services(s.Namespace).Get(context.Background(), s.Name, metav1.GetOptions{})
		if err != nil || svc.Annotations[string(annotation.LoadBalancerServedBy)] != "" || addresses(svc) != s.Address {
			t.Errorf("%s (not ours): %v, annotations %v, status %q (was %q)", name, err, svc.Annotations, addresses(svc), s.Address)
		}
	default:
		t.Errorf("%s: outcome %q not expected in this cluster (%s)", name, s.Outcome, s.Error)
	}
	return planned, got, disruptive
}

// waitAddress waits until the Service's status holds pool addresses that
// ok accepts and the CCM annotated it served, and returns them.
func waitAddress(t *testing.T, c kubernetes.Interface, s plan.ServicePlan, ok func(string) bool) string {
	t.Helper()
	var addr string
	framework.Eventually(t, settle, s.Namespace+"/"+s.Name+" served as planned ("+s.Outcome+")", framework.ServiceMatches(c, s.Namespace, s.Name, func(svc *corev1.Service) (bool, string) {
		addr = addresses(svc)
		served := svc.Annotations[string(annotation.LoadBalancerServedBy)] == s.Backend
		return served && ok(addr) && inPool(addr), fmt.Sprintf("status %q, served-by %q", addr, svc.Annotations[string(annotation.LoadBalancerServedBy)])
	}))
	return addr
}

func addresses(svc *corev1.Service) string { return strings.Join(framework.IngressIPs(svc), ",") }

func inPool(addrs string) bool {
	for _, a := range strings.Split(addrs, ",") {
		if ip, err := netip.ParseAddr(a); err != nil || !pool.Contains(ip) {
			return false
		}
	}
	return true
}

// refusedWith holds once a Warning event on the Service carries the
// plan's error (the router's "service ns/name: " prefix aside) and the
// Service has no address.
func refusedWith(c kubernetes.Interface, s plan.ServicePlan) framework.Condition {
	want := s.Error
	if _, after, ok := strings.Cut(want, s.Namespace+"/"+s.Name+": "); ok {
		want = after
	}
	return func(ctx context.Context) (bool, string, error) {
		evs, err := c.CoreV1().Events(s.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + s.Name})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err.Error(), nil
		}
		svc, err := c.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, want) && addresses(svc) == "" {
				return true, "", nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, fmt.Sprintf("want a Warning with %q; events %q, status %q", want, seen, addresses(svc)), nil
	}
}
