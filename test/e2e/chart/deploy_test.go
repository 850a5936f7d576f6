package chart

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestDeployManifestsCurrent fails when deploy/ is not what the chart
// renders (hack/helm/manifests.sh --check).
func TestDeployManifestsCurrent(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot(t), "hack", "helm", "manifests.sh"), "--check") //nolint:gosec // The repository's script.
	cmd.Env = append(os.Environ(), "HELM="+helm)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
