package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serviceMonitorCRD stands in for the Prometheus operator's CRD so the
// rendering with a ServiceMonitor can be applied too. Its schema is the
// operator's top level; the operator's full schema is not vendored.
const serviceMonitorCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

// TestServerSideDryRun applies every golden rendering to the real
// kube-apiserver with server-side dry-run and strict validation: unknown
// fields, wrong types and semantic errors (selectors, probes, PDBs, RBAC)
// fail here.
func TestServerSideDryRun(t *testing.T) {
	cp := suite.ControlPlane(t)
	ctx := ctxFor(t)
	if out, err := cp.KubectlWith(ctx, cp.AdminKubeconfig, strings.NewReader(serviceMonitorCRD), "apply", "-f", "-"); err != nil {
		t.Fatalf("ServiceMonitor CRD: %v\n%s", err, out)
	}
	if out, err := cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com"); err != nil {
		t.Fatalf("ServiceMonitor CRD: %v\n%s", err, out)
	}
	for _, r := range renderings(t) {
		t.Run(r.name, func(t *testing.T) {
			manifest := r.render(t)
			out, err := cp.KubectlWith(ctxFor(t), cp.AdminKubeconfig, strings.NewReader(manifest),
				"apply", "--dry-run=server", "--validate=strict", "-f", "-")
			if err != nil {
				t.Fatalf("server-side dry-run of %s: %v\n%s", r.name, err, out)
			}
			checkAccepted(t, manifest, out)
		})
	}
	// The manifests for users without Helm, as committed.
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/ (hack/helm/manifests.sh writes them): %v", err)
	}
	for _, f := range files {
		t.Run("deploy/"+filepath.Base(f), func(t *testing.T) {
			manifest, err := os.ReadFile(f) //nolint:gosec // The repository's manifests.
			if err != nil {
				t.Fatal(err)
			}
			out, err := cp.KubectlWith(ctxFor(t), cp.AdminKubeconfig, strings.NewReader(string(manifest)),
				"apply", "--dry-run=server", "--validate=strict", "-f", "-")
			if err != nil {
				t.Fatalf("server-side dry-run of %s: %v\n%s", f, err, out)
			}
			checkAccepted(t, string(manifest), out)
		})
	}
}

// checkAccepted fails unless kubectl reported every document of manifest.
func checkAccepted(t *testing.T, manifest, out string) {
	t.Helper()
	want := len(parse(t, manifest))
	if got := strings.Count(out, "(server dry run)"); got != want {
		t.Errorf("%d of %d objects accepted:\n%s", got, want, out)
	}
}
