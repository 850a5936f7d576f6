package foundation

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// runCCM runs the built binary with args and returns its output and exit
// status.
func runCCM(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	b := framework.RequireBinaries(t, func(b framework.Binaries) []string { return []string{b.CCM} })
	cmd := exec.Command(b.CCM, args...) //nolint:gosec // the binary under test.
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigValidate runs "multicloud-ccm config validate" from the built
// binary: the suite's own config passes; a broken one prints every problem
// with its field path in one run and exits with status 1.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCCM(t, "config", "validate", "--cloud-config", writeConfig(t, cloudConfig))
	if code != 0 || !strings.Contains(out, "valid (cluster e2e, 2 backend(s))") {
		t.Errorf("valid config: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	broken := strings.NewReplacer(
		"clusterID: e2e", "clusterID: E2E!",
		"zone: rack-a", "zon: rack-a",
		"unmanaged: error", "unmanaged: sometimes",
		`addresses: ["198.51.100.0/28"]`, `addresses: ["192.0.2.8/29"]`,
	).Replace(cloudConfig)
	out, errOut, code = runCCM(t, "config", "validate", "--cloud-config", writeConfig(t, broken))
	if code != 1 || out != "" {
		t.Fatalf("broken config: exit %d (want 1), stdout %q", code, out)
	}
	// One run reports every problem, the misspelt key's included, and logs
	// nothing.
	for _, want := range []string{
		"backends[0].baremetal.inventory[0].zon: Forbidden: unknown field", `did you mean "zone"?`,
		"clusterID: Invalid value", "nodes.unmanaged: Unsupported value", "problem(s)",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not report %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "command failed") {
		t.Errorf("stderr has a log line:\n%s", errOut)
	}
}

func TestConfigValidateHelp(t *testing.T) {
	t.Parallel()
	out, _, code := runCCM(t, "config", "validate", "--help")
	if code != 0 || !strings.Contains(out, "field path") || !strings.Contains(out, "exits non-zero") {
		t.Errorf("config validate --help: exit %d:\n%s", code, out)
	}
	out, _, code = runCCM(t, "--help")
	if code != 0 || !strings.Contains(out, "multicloud-ccm config validate --cloud-config FILE") || !strings.Contains(out, "--cloud-config") {
		t.Errorf("--help: exit %d, does not explain config validate:\n%.2000s", code, out)
	}
}
