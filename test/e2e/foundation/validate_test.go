package foundation

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestConfigValidateJSON runs "config validate -o json" from the built
// binary on issue 17's broken AWS section (a value of the wrong type, a
// misspelt key, a missing one, a secret with both file and env): one run
// reports them all as one JSON object on standard output, exit status 1,
// only the one-line count on standard error (no log line); a valid file is
// {"valid": true}.
func TestConfigValidateJSON(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "..", "cmd", "multicloud-ccm", "testdata", "broken", "aws-section.yaml")
	out, errOut, code := runCCM(t, "config", "validate", "--cloud-config", path, "-o", "json")
	if code != 1 || errOut != "Error: "+path+": 5 problem(s)\n" {
		t.Fatalf("broken config: exit %d (want 1), stderr %q, stdout %q", code, errOut, out)
	}
	var rep struct {
		File     string `json:"file"`
		Valid    bool   `json:"valid"`
		Problems []struct {
			Field, Type, Message string
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.Field+" "+p.Type)
	}
	want := []string{
		"backends[0].aws.credentials.accessKeyID FieldValueInvalid",
		"backends[0].aws.regin FieldValueForbidden",
		"backends[0].aws.region FieldValueInvalid",
		"backends[0].aws.vpc FieldValueInvalid",
		"backends[0].aws.credentials.secretAccessKey FieldValueInvalid",
	}
	if rep.Valid || rep.File != path || !slices.Equal(got, want) {
		t.Errorf("report: valid %v, file %q, problems\n%s\nwant\n%s", rep.Valid, rep.File, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	out, errOut, code = runCCM(t, "config", "validate", "--cloud-config", writeConfig(t, cloudConfig), "--output=json")
	if code != 0 || errOut != "" || !strings.Contains(out, `"valid": true`) || !strings.Contains(out, `"problems": []`) {
		t.Errorf("valid config: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	_, errOut, code = runCCM(t, "config", "validate", "--cloud-config", path, "-o", "yaml")
	if code != 1 || !strings.Contains(errOut, "--output must be text or json") {
		t.Errorf("-o yaml: exit %d, stderr %q", code, errOut)
	}
}
