package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// prometheusRuleAPI is what a cluster running the Prometheus operator
// reports for PrometheusRules.
const prometheusRuleAPI = "monitoring.coreos.com/v1/PrometheusRule"

// monitoringClass is the load-balancer class of monitoringConfig: classed
// Services go through the CCM's own controller, whose repair passes count
// drift repairs.
const monitoringClass = "multicloud-ccm.io/metal"

// monitoringConfig is one bare-metal backend (every metric the monitoring
// objects name is exported with it) with a class for drift repair.
const monitoringConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: e2e-monitoring
loadBalancer:
  defaultBackend: metal
  classes:
  - {name: ` + monitoringClass + `, backend: metal}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: bm-1
      addresses: [{type: InternalIP, address: 10.0.0.11}]
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28", "2001:db8::/124"]
`

// ownMetric finds multicloud-ccm's metric names in the monitoring objects;
// test/promrules checks with the PromQL parser that their expressions
// select no other metric.
var ownMetric = regexp.MustCompile(`multicloud_ccm_[a-z0-9_]*[a-z0-9]`)

// TestMonitoringMetricsExported renders the PrometheusRule and the Grafana
// dashboard, runs the built CCM against a real API server until every
// series they use exists (a LoadBalancer Service, and one whose address is
// edited away from its status, which a repair pass restores: a drift
// repair), and checks that /metrics declares each metric they name. A
// metric renamed or removed in the code breaks this test, not an alert.
func TestMonitoringMetricsExported(t *testing.T) {
	names := monitoringMetrics(t)
	cp := framework.StartControlPlaneT(t)
	ccm := cp.StartCCMT(t, framework.CCMOptions{Name: "monitoring", CloudConfig: monitoringConfig,
		ExtraArgs: []string{"--load-balancer-resync-period=2s"}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(ccm.Logs(framework.LogLines))
		}
	})
	ctx := ctxFor(t)
	driftRepair(ctx, t, cp)

	var missing []string
	framework.Eventually(t, 30*time.Second, "every metric of the monitoring objects in /metrics", func(ctx context.Context) (bool, string, error) {
		code, body, err := ccm.Get(ctx, "/metrics")
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprintf("/metrics: %d, %v", code, err), nil
		}
		declared := declaredMetrics(string(body))
		missing = missing[:0]
		for _, n := range names {
			if !declared[n] {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not in /metrics: %v", missing), nil
	})
	t.Logf("%d metrics named by the PrometheusRule and the dashboard, all exported: %v", len(names), names)
}

// monitoringMetrics renders both monitoring objects and returns the metric
// names their expressions, queries and texts use, histogram series
// (_bucket, _sum, _count) as their histogram's name.
func monitoringMetrics(t *testing.T) []string {
	t.Helper()
	objs := parse(t, mustRender(t, "-f", valuesFile("minimal"), "--api-versions", prometheusRuleAPI,
		"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.grafanaDashboard.enabled=true"))
	var text strings.Builder
	for _, o := range []object{find(t, objs, "PrometheusRule", ""), find(t, objs, "ConfigMap", release+"-dashboard")} {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		text.Write(b)
	}
	var names []string
	for _, n := range ownMetric.FindAllString(text.String(), -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if strings.HasSuffix(n, "_seconds"+suffix) {
				n = strings.TrimSuffix(n, suffix)
			}
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if len(names) < 8 {
		t.Fatalf("only %v found in the monitoring objects", names)
	}
	return names
}

// declaredMetrics returns the metric names /metrics declares with a TYPE
// line (a vector is declared once it has a series).
func declaredMetrics(body string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
		}
	}
	return out
}

// driftRepair gives a classed Service an address, edits it away from the
// status and waits for the repair pass to restore it, so the drift-repair
// counter has a series.
func driftRepair(ctx context.Context, t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	const name = "monitored"
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService("default", name, framework.WithLoadBalancerClass(monitoringClass))); err != nil {
		t.Fatal(err)
	}
	hasAddress := func(s *corev1.Service) (bool, string) {
		ips := framework.IngressIPs(s)
		return len(ips) > 0, fmt.Sprintf("status %v", ips)
	}
	framework.Eventually(t, 30*time.Second, name+" has an address", framework.ServiceMatches(cp.Client, "default", name, hasAddress))
	s, err := cp.Client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	if _, err := cp.Client.CoreV1().Services("default").UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the LoadBalancerDriftRepaired event on "+name,
		framework.EventWith(cp.Client, "Service", "default", name, "LoadBalancerDriftRepaired", "status address restored"))
}
