package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: demo
loadBalancer:
  defaultBackend: metal
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: bm-1
      addresses: [{type: InternalIP, address: 10.0.0.11}]
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28"]
`

// badConfig has four independent problems, one of them a misspelt key deep
// in a backend section.
const badConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: Demo_1
loadBalancer:
  defaultBackend: cloud
nodes:
  unmanaged: maybe
backends:
- name: metal
  type: baremetal
  baremetal:
    addressPools:
    - name: public
      addresses: ["192.0.2.0/33"]
`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// run executes "config validate" through the same cobra tree main builds.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newConfigCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestValidateValid(t *testing.T) {
	path := writeFile(t, validConfig)
	out, errOut, err := run(t, "validate", "--cloud-config", path)
	if err != nil {
		t.Fatalf("validate: %v (stderr %q)", err, errOut)
	}
	if !strings.Contains(out, "valid (cluster demo, 1 backend(s))") || errOut != "" {
		t.Errorf("stdout %q, stderr %q", out, errOut)
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	path := writeFile(t, badConfig)
	out, errOut, err := run(t, "validate", "--cloud-config", path)
	if err == nil {
		t.Fatal("validate accepted a bad config")
	}
	if !strings.Contains(err.Error(), "4 problem(s)") {
		t.Errorf("error %q does not count 4 problems", err)
	}
	if out != "" {
		t.Errorf("stdout %q, want nothing", out)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	want := []string{"clusterID: Invalid value", "backends[0].baremetal.addressPools[0].addresses[0]: Invalid value", "loadBalancer.defaultBackend: Unsupported value", "nodes.unmanaged: Unsupported value"}
	if len(lines) != len(want) {
		t.Fatalf("want one line per problem, got:\n%s", errOut)
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("no line starts with %q:\n%s", w, errOut)
		}
	}
}

func TestValidateUnknownKey(t *testing.T) {
	path := writeFile(t, strings.Replace(validConfig, "defaultBackend", "defaultBackedn", 1))
	_, errOut, err := run(t, "validate", "--cloud-config", path)
	if err == nil || !strings.Contains(errOut, "loadBalancer.defaultBackedn") || !strings.Contains(errOut, "fix its spelling") {
		t.Errorf("err %v, stderr %q", err, errOut)
	}
}

func TestValidateUsageErrors(t *testing.T) {
	if _, _, err := run(t, "validate"); err == nil || !strings.Contains(err.Error(), "--cloud-config is required") {
		t.Errorf("no flag: err = %v", err)
	}
	if _, _, err := run(t, "validate", "--cloud-config", filepath.Join(t.TempDir(), "nope.yaml")); err == nil {
		t.Error("a missing file was accepted")
	}
	if _, _, err := run(t, "validate", "extra", "--cloud-config", "x"); err == nil {
		t.Error("a stray argument was accepted")
	}
}

func TestValidateHelp(t *testing.T) {
	out, _, err := run(t, "validate", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"--cloud-config", "field path", "exits non-zero", "contacts no cloud"} {
		if !strings.Contains(out, w) {
			t.Errorf("help does not mention %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "--kubeconfig") {
		t.Errorf("help lists the controller's flags:\n%s", out)
	}
}
