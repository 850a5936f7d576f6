package promrules

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// grafanaVars are the dashboard's variables and Grafana's built-ins it
// uses, replaced by values Prometheus would get.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$job", ".*")

// ownPrefix starts every metric the monitoring objects may name: the e2e
// check of the binary's /metrics finds names by it.
const ownPrefix = "multicloud_ccm_"

// TestAlertExpressionsParse renders the chart's PrometheusRule and checks
// every rule: a unique alert name, an expression Prometheus parses naming
// only multicloud-ccm's metrics, a valid for:, a severity label, and a
// summary and description.
func TestAlertExpressionsParse(t *testing.T) {
	rule := findKind(t, render(t), "PrometheusRule")
	var spec struct {
		Spec struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Alert       string            `json:"alert"`
					Expr        string            `json:"expr"`
					For         string            `json:"for"`
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rule, &spec); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, g := range spec.Spec.Groups {
		for _, r := range g.Rules {
			t.Run(r.Alert, func(t *testing.T) {
				if r.Alert == "" || seen[r.Alert] {
					t.Errorf("group %s: alert name %q empty or repeated", g.Name, r.Alert)
				}
				seen[r.Alert] = true
				checkExpr(t, r.Expr)
				if r.For != "" {
					if _, err := model.ParseDuration(r.For); err != nil {
						t.Errorf("for: %q: %v", r.For, err)
					}
				}
				if s := r.Labels["severity"]; s != "critical" && s != "warning" {
					t.Errorf("severity %q: want critical or warning", s)
				}
				if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
					t.Errorf("annotations %v: want a summary and a description", r.Annotations)
				}
			})
		}
	}
	for _, want := range []string{
		"MulticloudCCMBackendDown", "MulticloudCCMLoadBalancerSyncFailing", "MulticloudCCMDriftRepairedRepeatedly",
		"MulticloudCCMAddressPoolNearlyFull", "MulticloudCCMCloudAPIThrottled",
	} {
		if !seen[want] {
			t.Errorf("alert %s missing", want)
		}
	}
}

// TestDashboardQueriesParse renders the dashboard's ConfigMap and parses
// every panel's queries (Grafana's variables replaced) and the job
// variable's metric.
func TestDashboardQueriesParse(t *testing.T) {
	cm := findKind(t, render(t), "ConfigMap")
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(cm, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Metadata.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap labels %v: want grafana_dashboard: \"1\"", obj.Metadata.Labels)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(obj.Data["multicloud-ccm.json"]), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	queries := 0
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			t.Run(p.Title, func(t *testing.T) { checkExpr(t, grafanaVars.Replace(tg.Expr)) })
			queries++
		}
	}
	if queries < 8 {
		t.Errorf("%d queries in the dashboard; want at least one per panel of docs/chart.md", queries)
	}
}

// checkExpr parses expr and checks every metric it selects is
// multicloud-ccm's own.
func checkExpr(t *testing.T, expr string) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%q does not parse: %v", expr, err)
		return
	}
	n := 0
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			n++
			if !strings.HasPrefix(vs.Name, ownPrefix) {
				t.Errorf("%q selects %q, not a metric of multicloud-ccm (%s*) that the e2e finds in /metrics", expr, vs.Name, ownPrefix)
			}
		}
		return nil
	})
	if n == 0 {
		t.Errorf("%q selects no metric", expr)
	}
}

// render runs helm template with both monitoring objects on, on a cluster
// serving PrometheusRules, and returns the documents as JSON.
func render(t *testing.T) [][]byte {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	helm := os.Getenv("HELM_BIN")
	if helm == "" {
		helm = filepath.Join(root, "_output", "tools", "bin", "helm")
	}
	if _, err := os.Stat(helm); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no helm: %v (hack/helm/install.sh builds it)", err)
		}
		t.Skipf("no helm: %v (hack/helm/install.sh builds it)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	cmd := exec.CommandContext(ctx, helm, "template", "multicloud-ccm", filepath.Join(root, "charts", "multicloud-ccm"), //nolint:gosec // The test's helm.
		"--namespace", "kube-system", "--kube-version", "v1.37.1",
		"-f", filepath.Join(root, "test", "e2e", "chart", "testdata", "values", "minimal.yaml"),
		"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.grafanaDashboard.enabled=true",
		// The admission policy's parameter ConfigMap is not this test's.
		"--set", "admissionPolicy.enabled=false",
		"--api-versions", "monitoring.coreos.com/v1/PrometheusRule")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tmp, "HELM_CONFIG_HOME="+tmp, "HELM_DATA_HOME="+tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	var docs [][]byte
	for _, d := range strings.Split(string(out), "\n---") {
		if strings.TrimSpace(d) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Fatalf("rendered document does not parse: %v\n%s", err, d)
		}
		docs = append(docs, j)
	}
	return docs
}

// findKind returns the one document of kind.
func findKind(t *testing.T, docs [][]byte, kind string) []byte {
	t.Helper()
	var found [][]byte
	for _, d := range docs {
		var m struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(d, &m); err == nil && m.Kind == kind {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d documents of kind %s rendered, want 1", len(found), kind)
	}
	return found[0]
}
