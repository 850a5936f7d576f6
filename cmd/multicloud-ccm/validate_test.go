package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// TestValidateBrokenFiles: every problem of each broken file, one file per
// class of problem, is reported in one run, each path once.
func TestValidateBrokenFiles(t *testing.T) {
	tests := []struct {
		file string
		want []string // every reported problem: path and type, in order
		say  []string // what the messages must say
	}{
		{"aws-section.yaml", []string{ // issue 17: took three runs to clear.
			"backends[0].aws.credentials.accessKeyID: Invalid value",
			"backends[0].aws.regin: Forbidden",
			"backends[0].aws.region: Invalid value",
			"backends[0].aws.vpc: Invalid value",
			"backends[0].aws.credentials.secretAccessKey: Invalid value",
		}, []string{"must be a secret reference, not a string", `did you mean "region"?`, "set only one of file and env"}},
		{"yaml-boolean.yaml", []string{
			"backends[0].aws.credentials.accessKeyID.env: Invalid value",
		}, []string{"must be a string, not a boolean", "YAML reads unquoted", "y/n", "quote the value"}},
		{"not-yaml.yaml", []string{
			"testdata/broken/not-yaml.yaml: not valid YAML",
		}, []string{"line 3"}},
		{"repeated-key.yaml", []string{
			"testdata/broken/repeated-key.yaml: line 5",
			"clusterID: Invalid value",
			"backends[0].baremetal.addressPools[0].addresses[0]: Invalid value",
		}, []string{`key "clusterID" already set`}},
		{"top-level-types.yaml", []string{
			"backends[0].name: Invalid value",
			"clusterID: Invalid value",
			"nodes.rules: Invalid value",
			"nodes.unmanaged: Invalid value",
			"backends[0].baremetal: Required value",
			"backends[1].baremetal.addressPools[0].autoAssign: Invalid value",
			"loadBalancer.defaultBackend: Unsupported value",
		}, []string{"must be a string, not a list", "must be a list, not a map", "must be a string, not a number", "must be true or false, not a string"}},
		{"unknown-keys.yaml", []string{
			"loadBalancer.defaultBackedn: Forbidden",
			"nodes.rules[0].nodeNameRegexp: Forbidden",
			"backends[0].typ: Forbidden",
			"backends[0].type: Required value",
			"backends[1].baremetal.inventory[0].zonee: Forbidden",
			"backends[2].vsphere: Forbidden",
			"backends[2].baremetal: Required value",
			"backends[3].type: Unsupported value",
			"nodes.rules[0]: Required value",
		}, []string{`did you mean "defaultBackend"?`, `did you mean "nodeNameRegex"?`, `did you mean "type"?`, `did you mean "zone"?`}},
		{"section-wrong-type.yaml", []string{
			"backends[0].aws: Invalid value",
			"backends[1].vsphere: Invalid value",
			"backends[2].baremetal: Required value",
		}, []string{"must be a map (key: value), not a list", "not a string"}},
		{"section-types.yaml", []string{
			"backends[0].vsphere.refreshInterval: Invalid value",
			"backends[0].vsphere.requestTimeout: Invalid value",
			"backends[0].vsphere.vcenters[0].datacenters: Invalid value",
			"backends[0].vsphere.vcenters[0].insecure: Invalid value",
			"backends[0].vsphere.vcenters[0].password: Invalid value",
			"backends[0].vsphere.vcenters[0].server: Invalid value",
			"backends[1].openstack.auth.projectName: Invalid value",
			"backends[1].openstack.auth.username: Invalid value",
			"backends[1].openstack.insecure: Invalid value",
			"backends[1].openstack.region: Required value",
			"backends[1].openstack.loadBalancer.vipSubnetID: Required value",
		}, []string{"must be a duration such as 30s", `"soon"`, "write true or false without quotes"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", "broken", tc.file)
			var out, errOut bytes.Buffer
			err := validate(&out, &errOut, path, false)
			if err == nil || err.Error() != fmt.Sprintf("%s: %d problem(s)", path, len(tc.want)) {
				t.Errorf("err = %v, want %d problem(s)", err, len(tc.want))
			}
			lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("got %d problems, want %d:\n%s", len(lines), len(tc.want), errOut.String())
			}
			for i := range min(len(lines), len(tc.want)) {
				if !strings.HasPrefix(lines[i], tc.want[i]+":") {
					t.Errorf("problem %d = %q, want %q", i, lines[i], tc.want[i])
				}
				if p, _, _ := strings.Cut(tc.want[i], ":"); strings.Count(lines[i], p) != 1 {
					t.Errorf("problem %d repeats its path: %q", i, lines[i])
				}
			}
			for _, s := range tc.say {
				if !strings.Contains(errOut.String(), s) {
					t.Errorf("no problem says %q:\n%s", s, errOut.String())
				}
			}
			if strings.Contains(errOut.String(), "JSON") || strings.Contains(errOut.String(), "hunter2") || strings.Contains(errOut.String(), "AKIAEXAMPLE") {
				t.Errorf("problems speak JSON or repeat a secret:\n%s", errOut.String())
			}
		})
	}
}

// TestValidateJSON: --output json prints one object with every problem.
func TestValidateJSON(t *testing.T) {
	path := filepath.Join("testdata", "broken", "aws-section.yaml")
	out, errOut, err := run(t, "validate", "--cloud-config", path, "-o", "json")
	if err == nil || errOut != "" {
		t.Fatalf("err %v, stderr %q", err, errOut)
	}
	var rep report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Valid || rep.File != path || len(rep.Problems) != 5 {
		t.Fatalf("report = %+v", rep)
	}
	p := rep.Problems[1]
	if p.Field != "backends[0].aws.regin" || p.Type != "FieldValueForbidden" || !strings.HasPrefix(p.Message, "Forbidden: unknown field") {
		t.Errorf("problem 1 = %+v", p)
	}
	out, _, err = run(t, "validate", "--cloud-config", writeFile(t, validConfig), "--output=json")
	if err != nil || !strings.Contains(out, `"valid": true`) || !strings.Contains(out, `"problems": []`) || !strings.Contains(out, `"clusterID": "demo"`) {
		t.Errorf("valid file: err %v, out %s", err, out)
	}
	if _, _, err := run(t, "validate", "--cloud-config", path, "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "text or json") {
		t.Errorf("-o yaml: err = %v", err)
	}
}

// TestValidateExitStatus runs the binary's main (this test binary, run
// again): exit status 1, the problems and one summary line, no log line.
func TestValidateExitStatus(t *testing.T) {
	if os.Getenv("MCCM_TEST_RUN_MAIN") != "" {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "broken", "aws-section.yaml")
	cmd := exec.Command(exe, "config", "validate", "--cloud-config", path)
	cmd.Env = append(os.Environ(), "MCCM_TEST_RUN_MAIN=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1; stderr:\n%s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if len(lines) != 6 || lines[5] != "Error: "+path+": 5 problem(s)" || out.Len() != 0 {
		t.Errorf("stdout %q, stderr:\n%s", out.String(), errOut.String())
	}
	for _, l := range lines {
		if strings.Contains(l, "command failed") || (len(l) > 5 && l[0] == 'E' && l[1] >= '0' && l[1] <= '9') {
			t.Errorf("log line in the output: %q", l)
		}
	}
}

// TestMain runs the binary's main when a test runs this binary again.
func TestMain(m *testing.M) {
	if os.Getenv("MCCM_TEST_RUN_MAIN") != "" {
		os.Args = append([]string{"multicloud-ccm"}, os.Args[1:]...)
		main()
	}
	os.Exit(m.Run())
}

// TestValidateDefaultWithoutLoadBalancers (#24 defect 9): config validate
// refuses what the running CCM refuses, a defaultBackend naming a backend
// without load balancers, naming the field and the fix.
func TestValidateDefaultWithoutLoadBalancers(t *testing.T) {
	path := writeFile(t, `apiVersion: multicloud-ccm.io/v1alpha1
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
`)
	_, errOut, err := run(t, "validate", "--cloud-config", path)
	want := `loadBalancer.defaultBackend: Invalid value: "metal": backend "metal" has no load balancers: add an address pool under backends[0].baremetal.addressPools`
	if err == nil || !strings.Contains(errOut, want) {
		t.Errorf("validate = %v, stderr %q; want %q", err, errOut, want)
	}
}
