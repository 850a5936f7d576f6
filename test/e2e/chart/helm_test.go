package chart

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// update rewrites the golden files under testdata/golden.
var update = flag.Bool("update", false, "rewrite the golden renderings in testdata/golden")

const (
	// envHelm names the helm binary (default _output/tools/bin/helm, which
	// hack/helm/install.sh builds).
	envHelm = "HELM_BIN"
	// kubeVersion is the Kubernetes version the chart is rendered for: the
	// version of the e2e control plane.
	kubeVersion = "v1.37.1"
	// release and namespace of every rendering in these tests.
	release   = "multicloud-ccm"
	namespace = "kube-system"
	// serviceMonitorAPI is what a cluster running the Prometheus operator
	// reports.
	serviceMonitorAPI = "monitoring.coreos.com/v1/ServiceMonitor"
)

// repoRoot returns the repository's root folder.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	return root
}

func chartDir(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(repoRoot(tb), "charts", "multicloud-ccm")
}

// helmBin returns the helm binary, or skips (fails with CI set) when it is
// missing, as the framework does for its binaries.
func helmBin(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv(envHelm)
	if p == "" {
		p = filepath.Join(repoRoot(tb), "_output", "tools", "bin", "helm")
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		framework.MissingBinaries(tb, fmt.Errorf("no executable at %s (set %s; hack/helm/install.sh builds it)", p, envHelm))
	}
	return p
}

// runHelm runs helm and returns its standard output; standard error is in
// the error.
func runHelm(tb testing.TB, args ...string) (string, error) {
	tb.Helper()
	stdout, _, err := runHelmOutputs(tb, args...)
	return stdout, err
}

// runHelmOutputs runs helm and returns standard output and standard error.
func runHelmOutputs(tb testing.TB, args ...string) (string, string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin(tb), args...) //nolint:gosec // The test's own helm.
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tb.TempDir(), "HELM_CONFIG_HOME="+tb.TempDir(), "HELM_DATA_HOME="+tb.TempDir())
	if err := cmd.Run(); err != nil {
		return stdout.String(), stderr.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), stderr.String(), nil
}

// valuesFile is the path of testdata/values/<name>.yaml.
func valuesFile(name string) string {
	return filepath.Join("testdata", "values", name+".yaml")
}

// valuesNames lists testdata/values, sorted.
func valuesNames(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "values", "*.yaml"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no values files in testdata/values: %v", err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// render runs helm template for the chart with the given extra arguments.
func render(tb testing.TB, args ...string) (string, error) {
	tb.Helper()
	base := []string{"template", release, chartDir(tb), "--namespace", namespace, "--kube-version", kubeVersion}
	return runHelm(tb, append(base, args...)...)
}

// mustRender renders or fails the test.
func mustRender(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := render(tb, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// object is one rendered manifest.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { s, _ := get(o, "metadata", "name").(string); return s }
func (o object) namespace() string {
	s, _ := get(o, "metadata", "namespace").(string)
	return s
}

// get walks maps by key and lists by index (an int).
func get(v any, path ...any) any {
	if o, ok := v.(object); ok {
		v = map[string]any(o)
	}
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// parse splits a multi-document rendering into objects.
func parse(tb testing.TB, manifest string) []object {
	tb.Helper()
	var objs []object
	for _, doc := range splitDocs(manifest) {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			tb.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

func splitDocs(manifest string) []string {
	var docs []string
	for _, d := range strings.Split("\n"+manifest, "\n---") {
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// find returns the one object of kind and name ("" matches any name).
func find(tb testing.TB, objs []object, kind, name string) object {
	tb.Helper()
	var found []object
	for _, o := range objs {
		if o.kind() == kind && (name == "" || o.name() == name) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		tb.Fatalf("want exactly one %s %q in the rendering, found %d", kind, name, len(found))
	}
	return found[0]
}

// workload returns the Deployment or DaemonSet.
func workload(tb testing.TB, objs []object) object {
	tb.Helper()
	for _, o := range objs {
		if o.kind() == "Deployment" || o.kind() == "DaemonSet" {
			return o
		}
	}
	tb.Fatal("no Deployment or DaemonSet rendered")
	return nil
}

// containerArgs returns the CCM container's arguments.
func containerArgs(tb testing.TB, objs []object) []string {
	tb.Helper()
	raw, _ := get(workload(tb, objs), "spec", "template", "spec", "containers", 0, "args").([]any)
	var args []string
	for _, a := range raw {
		args = append(args, fmt.Sprint(a))
	}
	return args
}

// flagValue returns the value of --name in args and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// configFromRendering returns the cloud-config of the rendered Secret.
func configFromRendering(tb testing.TB, objs []object) (string, error) {
	tb.Helper()
	for _, o := range objs {
		if o.kind() == "Secret" {
			if s, ok := get(o, "stringData", "cloud-config.yaml").(string); ok {
				return s, nil
			}
		}
	}
	return "", errors.New("no Secret with stringData cloud-config.yaml in the rendering")
}
