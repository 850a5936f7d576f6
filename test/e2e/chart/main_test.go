package chart

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// suite is the control plane shared by the dry-run and leader-election
// tests; the RBAC test starts its own (with an audit log).
var suite framework.Shared

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// rbacKinds are the documents installed to run the CCM as the chart's
// ServiceAccount (the workload itself cannot run: there is no kubelet).
var rbacKinds = map[string]bool{
	"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
}

// installRBAC applies the rendering's ServiceAccount and RBAC documents as
// admin and returns them parsed.
func installRBAC(t *testing.T, cp *framework.ControlPlane, manifest string) []object {
	t.Helper()
	var docs []string
	var objs []object
	for _, doc := range splitDocs(manifest) {
		o := parse(t, doc)
		if len(o) == 1 && rbacKinds[o[0].kind()] {
			docs = append(docs, doc)
			objs = append(objs, o[0])
		}
	}
	out, err := cp.KubectlWith(ctxFor(t), cp.AdminKubeconfig, strings.NewReader(strings.Join(docs, "\n---")), "apply", "--validate=strict", "-f", "-")
	if err != nil {
		t.Fatalf("install the chart's RBAC: %v\n%s", err, out)
	}
	return objs
}

// ccmArgs turns the chart's container arguments into CCMOptions.ExtraArgs:
// everything but the file and port flags the framework sets itself. The
// chart sets no --cert-dir (the serving certificate stays in memory, so a
// read-only root filesystem works): neither does the CCM here.
func ccmArgs(t *testing.T, objs []object) []string {
	t.Helper()
	out := []string{"--cert-dir="}
	for _, a := range containerArgs(t, objs) {
		if strings.HasPrefix(a, "--cloud-config=") || strings.HasPrefix(a, "--secure-port=") {
			continue
		}
		out = append(out, a)
	}
	return out
}

// chartServiceAccount returns the rendered ServiceAccount's namespace and name.
func chartServiceAccount(t *testing.T, objs []object) (string, string) {
	t.Helper()
	sa := find(t, objs, "ServiceAccount", "")
	return sa.namespace(), sa.name()
}
