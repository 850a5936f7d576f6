package chart

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// TestTolerations: on every rendering the CCM tolerates what a critical
// add-on on a control-plane node must (CriticalAddonsOnly), and is never
// evicted from a NotReady node (node.kubernetes.io/not-ready:NoExecute):
// it is what makes nodes Ready.
func TestTolerations(t *testing.T) {
	for _, r := range renderings(t) {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			pod := get(workload(t, parse(t, r.render(t))), "spec", "template", "spec")
			have := map[string]bool{}
			for _, tol := range get(pod, "tolerations").([]any) {
				k, _ := get(tol, "key").(string)
				e, _ := get(tol, "effect").(string)
				op, _ := get(tol, "operator").(string)
				if op == "Exists" {
					have[k+":"+e] = true
				}
			}
			for _, want := range []string{"CriticalAddonsOnly:", "node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/not-ready:NoSchedule"} {
				if !have[want] {
					t.Errorf("no toleration %s with operator Exists (have %v)", want, have)
				}
			}
		})
	}
}

// TestThroughputDefaults: the chart raises the client rate limits and the
// Service workers above upstream's (--kube-api-qps=20, burst 30, one
// worker), which queue 1,000 Services for about 200 s; docs/chart.md gives
// the trade-off.
func TestThroughputDefaults(t *testing.T) {
	args := containerArgs(t, parse(t, mustRender(t, "-f", valuesFile("minimal"))))
	for flag, min := range map[string]int{"kube-api-qps": 50, "kube-api-burst": 100, "concurrent-service-syncs": 5} {
		v, ok := flagValue(args, flag)
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < min {
			t.Errorf("--%s=%q, want at least %d", flag, v, min)
		}
	}
}

// TestServiceMonitor: the ServiceMonitor authenticates with its
// authorization field (bearerTokenFile is deprecated and reads Prometheus's
// own token), names a token Secret that exists, and verifies TLS when the
// CCM has a certificate with a CA.
func TestServiceMonitor(t *testing.T) {
	endpoint := func(t *testing.T, extra ...string) (any, []object) {
		objs := parse(t, mustRender(t, append([]string{"-f", valuesFile("ha"), "--api-versions", serviceMonitorAPI}, extra...)...))
		return get(find(t, objs, "ServiceMonitor", ""), "spec", "endpoints", 0), objs
	}
	t.Run("chart's own token", func(t *testing.T) {
		ep, objs := endpoint(t)
		if get(ep, "bearerTokenFile") != nil {
			t.Errorf("endpoint uses the deprecated bearerTokenFile: %v", ep)
		}
		if get(ep, "authorization", "type") != "Bearer" {
			t.Fatalf("endpoint authorization %v: want type Bearer", get(ep, "authorization"))
		}
		secret := find(t, objs, "Secret", get(ep, "authorization", "credentials", "name").(string))
		if get(secret, "type") != "kubernetes.io/service-account-token" {
			t.Errorf("token Secret %s: type %v", secret.name(), get(secret, "type"))
		}
		sa := get(secret, "metadata", "annotations", "kubernetes.io/service-account.name").(string)
		find(t, objs, "ServiceAccount", sa)
		role := find(t, objs, "ClusterRole", sa)
		if rules := get(role, "rules").([]any); len(rules) != 1 || strings.Join(toStrings(get(rules[0], "nonResourceURLs")), ",") != "/metrics" ||
			strings.Join(toStrings(get(rules[0], "verbs")), ",") != "get" {
			t.Errorf("metrics reader role %v: want only GET /metrics", rules)
		}
		if get(ep, "tlsConfig", "insecureSkipVerify") != true {
			t.Errorf("without tls.secretName the self-signed certificate cannot be verified: tlsConfig %v", get(ep, "tlsConfig"))
		}
	})
	t.Run("existing token and serving certificate", func(t *testing.T) {
		ep, objs := endpoint(t, "--set", "metrics.serviceMonitor.authorization.secretName=prom-token", "--set", "tls.secretName=ccm-tls")
		if get(ep, "authorization", "credentials", "name") != "prom-token" {
			t.Errorf("authorization %v: want the given Secret", get(ep, "authorization"))
		}
		for _, o := range objs {
			if strings.HasSuffix(o.name(), "-metrics-reader") {
				t.Errorf("%s %s rendered although the token Secret is the user's", o.kind(), o.name())
			}
		}
		if get(ep, "tlsConfig", "insecureSkipVerify") != nil || get(ep, "tlsConfig", "ca", "secret", "name") != "ccm-tls" {
			t.Errorf("tlsConfig %v: want verification against ccm-tls's ca.crt", get(ep, "tlsConfig"))
		}
		args := containerArgs(t, objs)
		if v, _ := flagValue(args, "tls-cert-file"); v != "/etc/multicloud-ccm/tls/tls.crt" {
			t.Errorf("--tls-cert-file=%q: the CCM must serve the Secret's certificate", v)
		}
	})
}

// TestServiceMonitorWithoutCRD: enabled on a cluster without the
// Prometheus operator's CRDs, nothing is rendered and the install's notes
// say so. helm's dry run asks the API server what it serves: this test
// has its own (the shared one gets the CRD in TestServerSideDryRun).
func TestServiceMonitorWithoutCRD(t *testing.T) {
	cp := framework.StartControlPlaneT(t)
	out, err := runHelm(t, "install", "mccm-no-crd", chartDir(t), "--dry-run=server", "--kubeconfig", cp.AdminKubeconfig, "--namespace", "default", "-f", valuesFile("ha"))
	if err != nil {
		t.Fatal(err)
	}
	manifest, notes, _ := strings.Cut(out, "NOTES:")
	if strings.Contains(manifest, "kind: ServiceMonitor") {
		t.Error("a ServiceMonitor was rendered for a cluster that does not serve the API")
	}
	if !strings.Contains(notes, "WARNING: metrics.serviceMonitor.enabled") {
		t.Errorf("the notes do not warn that no ServiceMonitor was created:\n%s", notes)
	}
}

// TestAPIServerValue: apiServer.host points the CCM at the API server
// itself, for a host-network pod before kube-proxy runs.
func TestAPIServerValue(t *testing.T) {
	objs := parse(t, mustRender(t, "-f", valuesFile("minimal"), "--set", "hostNetwork=true", "--set", "apiServer.host=10.0.0.10"))
	env := map[string]any{}
	for _, e := range get(workload(t, objs), "spec", "template", "spec", "containers", 0, "env").([]any) {
		env[get(e, "name").(string)] = get(e, "value")
	}
	if env["KUBERNETES_SERVICE_HOST"] != "10.0.0.10" || env["KUBERNETES_SERVICE_PORT"] != "6443" {
		t.Errorf("env %v: want KUBERNETES_SERVICE_HOST=10.0.0.10 and KUBERNETES_SERVICE_PORT=6443", env)
	}
	for _, e := range get(workload(t, parse(t, mustRender(t, "-f", valuesFile("minimal")))), "spec", "template", "spec", "containers", 0, "env").([]any) {
		if name := get(e, "name").(string); strings.HasPrefix(name, "KUBERNETES_SERVICE_") {
			t.Errorf("without apiServer.host the pod must keep the in-cluster default, not set %s", name)
		}
	}
}

// TestPodIdentityEnv: the pod knows its own name and namespace (downward
// API), where the CCM records configuration reload events.
func TestPodIdentityEnv(t *testing.T) {
	refs := map[string]any{}
	for _, e := range get(workload(t, parse(t, mustRender(t, "-f", valuesFile("minimal")))), "spec", "template", "spec", "containers", 0, "env").([]any) {
		refs[get(e, "name").(string)] = get(e, "valueFrom", "fieldRef", "fieldPath")
	}
	if refs["POD_NAME"] != "metadata.name" || refs["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("env field references %v: want POD_NAME from metadata.name and POD_NAMESPACE from metadata.namespace", refs)
	}
}

// repoLink is a link into this repository's main branch.
var repoLink = regexp.MustCompile(`https://(?:github\.com/multicloud-ccm/multicloud-ccm/blob|raw\.githubusercontent\.com/multicloud-ccm/multicloud-ccm)/main/([^\s)"'>]+)`)

// TestPackagedChart packages the chart as a user downloads it: its README
// is a quick start (install, minimal values, upgrade) that names no file
// outside the package except by a link that resolves in this repository;
// Chart.yaml carries maintainers, an icon and Artifact Hub annotations;
// every repository link in the package names a file that exists.
func TestPackagedChart(t *testing.T) {
	dir := t.TempDir()
	if _, err := runHelm(t, "package", chartDir(t), "--destination", dir); err != nil {
		t.Fatal(err)
	}
	tgz, _ := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if len(tgz) != 1 {
		t.Fatalf("helm package wrote %v", tgz)
	}
	files := untar(t, tgz[0])
	readme := files["multicloud-ccm/README.md"]
	for _, want := range []string{"helm install", "helm upgrade", "config:", "kind: CloudConfig", "apiServer.host"} {
		if !strings.Contains(readme, want) {
			t.Errorf("the packaged README has no %q", want)
		}
	}
	for _, bad := range []string{"test/e2e", "`docs/", "charts/multicloud-ccm"} {
		if strings.Contains(readme, bad) {
			t.Errorf("the packaged README names %q, which is not in the package", bad)
		}
	}
	var chart struct {
		Maintainers []map[string]string `json:"maintainers"`
		Icon        string              `json:"icon"`
		Annotations map[string]string   `json:"annotations"`
	}
	if err := yaml.Unmarshal([]byte(files["multicloud-ccm/Chart.yaml"]), &chart); err != nil {
		t.Fatal(err)
	}
	if len(chart.Maintainers) == 0 || chart.Icon == "" {
		t.Errorf("Chart.yaml: maintainers %v, icon %q", chart.Maintainers, chart.Icon)
	}
	for _, a := range []string{"artifacthub.io/license", "artifacthub.io/links", "artifacthub.io/images"} {
		if chart.Annotations[a] == "" {
			t.Errorf("Chart.yaml has no %s annotation", a)
		}
	}
	root := repoRoot(t)
	for name, content := range files {
		if strings.Contains(content, "docs/config.md") {
			t.Errorf("%s points at docs/config.md, which does not exist", name)
		}
		for _, m := range repoLink.FindAllStringSubmatch(content, -1) {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[1]))); err != nil {
				t.Errorf("%s links to %s, which is not in the repository", name, m[0])
			}
		}
	}
}

// untar reads a .tgz into a map of file name to content.
func untar(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path) //nolint:gosec // helm's output.
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(b)
	}
}
