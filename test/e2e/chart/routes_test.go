package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// routesValues installs the chart with routes on: the aws backend pointed
// at the in-process EC2 wire fake (%[1]s its URL, %[2]s the VPC, %[3]s the
// route table).
const routesValues = `fullnameOverride: mccm-routes
args:
  configure-cloud-routes: true
  cluster-cidr: 10.244.0.0/16
  allocate-node-cidrs: false
env:
  - {name: E2E_AWS_ACCESS_KEY_ID, value: AKIDE2EFAKE}
  - {name: E2E_AWS_SECRET_ACCESS_KEY, value: e2e-fake-secret}
config:
  apiVersion: multicloud-ccm.io/v1alpha1
  kind: CloudConfig
  clusterID: chart-routes
  backends:
    - name: aws-vpc
      type: aws
      aws:
        region: eu-west-1
        vpc: %[2]s
        endpoints: {ec2: %[1]q, elbv2: %[1]q, sts: %[1]q}
        credentials:
          accessKeyID: {env: E2E_AWS_ACCESS_KEY_ID}
          secretAccessKey: {env: E2E_AWS_SECRET_ACCESS_KEY}
        instanceCacheTTL: 2s
        routes:
          routeTableID: %[3]s
`

// TestRBACProvenRoutes is TestRBACProven for the route controller, which
// the chart only enables (and grants) with configure-cloud-routes: the
// chart's RBAC and flags, a token of its ServiceAccount, and an AWS
// instance whose Node gets a pod-CIDR route and NetworkUnavailable=False.
func TestRBACProvenRoutes(t *testing.T) {
	cp, auditLog := startAuditedControlPlane(t)
	ctx := ctxFor(t)
	f := awsfake.New("eu-west-1")
	seeded := f.Seed(awsfake.SeedSpec{ClusterID: "chart-routes", Instances: 1})
	const rtb = "rtb-0c0ffee"
	f.AddRouteTable(awsfake.RouteTable{ID: rtb, VPCID: seeded.VPCID})
	fake, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })

	values := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(values, []byte(fmt.Sprintf(routesValues, fake.URL, seeded.VPCID, rtb)), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest := mustRender(t, "-f", values)
	objs := parse(t, manifest)
	installed := installRBAC(t, cp, manifest)
	saNS, saName := chartServiceAccount(t, objs)
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, saNS, saName)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configFromRendering(t, objs)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, e := range get(workload(t, objs), "spec", "template", "spec", "containers", 0, "env").([]any) {
		if v, ok := get(e, "value").(string); ok { // not the downward API's
			env = append(env, fmt.Sprintf("%s=%s", get(e, "name"), v))
		}
	}
	ccm := cp.StartCCMT(t, framework.CCMOptions{CloudConfig: cfg, Kubeconfig: kubeconfig, ExtraArgs: ccmArgs(t, objs), Env: env})

	in := seeded.Instances[0]
	node := framework.NewNode(in.PrivateDNSName, framework.WithProviderID(fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)))
	node.Spec.PodCIDR, node.Spec.PodCIDRs = "10.244.7.0/24", []string{"10.244.7.0/24"}
	if _, err := framework.CreateNode(ctx, cp.Client, node); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "the node's pod-CIDR route in "+rtb, func(_ context.Context) (bool, string, error) {
		rt, _ := fake.GetRouteTable(rtb)
		return slices.ContainsFunc(rt.Routes, func(r awsfake.Route) bool {
			return r.DestinationCIDR == "10.244.7.0/24" && r.InstanceID == in.ID
		}), fmt.Sprintf("routes %v", rt.Routes), nil
	})
	framework.Eventually(t, settle, "NetworkUnavailable=False on the node", framework.NodeMatches(cp.Client, in.PrivateDNSName, func(n *corev1.Node) (bool, string) {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeNetworkUnavailable {
				return c.Status == corev1.ConditionFalse, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason)
			}
		}
		return false, "no NetworkUnavailable condition"
	}))
	// The paths every install uses: a repeated Warning from the router's
	// identity, an authenticated /metrics and the published status.
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("stray")); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "a repeated Warning about stray", repeatedEvent(cp, "Node", "stray", ""))
	if code, body, err := ccm.Get(ctx, "/metrics"); err != nil || code != 200 {
		t.Fatalf("GET /metrics as admin: %d %v %.300s", code, err, body)
	}
	if code, _, err := ccm.GetWithToken(ctx, "/metrics", ""); err != nil || code != 401 && code != 403 {
		t.Errorf("GET /metrics without a token: %d %v; want 401 or 403", code, err)
	}
	framework.Eventually(t, settle, "the status ConfigMap created, then updated", statusUpdated(cp))
	if err := ccm.Stop(15 * time.Second); err != nil {
		t.Errorf("stop CCM: %v", err)
	}
	if log, err := os.ReadFile(ccm.LogPath()); err == nil && strings.Contains(strings.ToLower(string(log)), "forbidden") {
		t.Errorf("the CCM's log reports a forbidden request:\n%s", grepLines(string(log), "forbidden"))
	}
	counts := checkAudit(t, auditLog, installed, map[string]string{
		// Upstream's service controller is disabled by default; the
		// chart keeps its identity for the switch back
		// (--controllers=*,service).
		"get serviceaccounts/service-controller":          "upstream's service controller, off by default",
		"create serviceaccounts/token/service-controller": "upstream's service controller, off by default",
		// Nor does multicloud-load-balancer write an event.
		"create serviceaccounts/token/multicloud-load-balancer": "no load balancer in this run",
		"create events as multicloud-load-balancer":             "no load balancer in this run",
		"patch events as multicloud-load-balancer":              "no load balancer in this run",
		// Nor does the router record where a load balancer lives, or
		// clear a released address.
		"get services":          "no load balancer in this run",
		"patch services":        "no load balancer in this run",
		"patch services/status": "no load balancer in this run",
	})
	if counts["system:serviceaccount:kube-system:route-controller"] == 0 {
		t.Error("no request as kube-system/route-controller: the route controller did not use its own identity")
	}
}
