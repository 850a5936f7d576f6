package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/bmconfig"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// The real baremetal section parser and cross-section check are registered
// as backends.Register registers them for package baremetal (whose test
// TestRegistersBMConfig checks they are these), so these tests decode the
// sections the way the binary does. The backend package itself stays out of
// this test binary: it would bring client-go and cloud-provider into the
// instrumented build of FuzzParse (docs/testing.md). Nothing else in the
// binary registers baremetal; a second registration would panic.
func init() {
	config.RegisterSection(bmconfig.Type, bmconfig.ParseSection)
	config.RegisterCrossValidator(bmconfig.Type, bmconfig.CheckPoolsAcross)
}

const header = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: demo
`

const metal = `
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

func mustParse(t *testing.T, doc string) *config.CloudConfig {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), t.TempDir())
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

func TestParseExample(t *testing.T) {
	cfg, err := config.Load(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		t.Fatalf("the documented example does not load: %v", err)
	}
	if cfg.ClusterID != "demo" || cfg.LoadBalancer.DefaultBackend != "metal" || cfg.Nodes.Unmanaged != config.UnmanagedError {
		t.Errorf("top level = %q %q %q", cfg.ClusterID, cfg.LoadBalancer.DefaultBackend, cfg.Nodes.Unmanaged)
	}
	if len(cfg.Backends) != 1 || cfg.Backends[0].Name != "metal" || cfg.Backends[0].Type != "baremetal" {
		t.Fatalf("backends = %+v", cfg.Backends)
	}
	s, ok := cfg.Backends[0].Settings.(*bmconfig.Settings)
	if !ok {
		t.Fatalf("Settings is %T, want *bmconfig.Settings", cfg.Backends[0].Settings)
	}
	if len(s.Inventory) != 1 || s.Inventory[0].Zone != "rack-a" || s.Inventory[0].Labels["example.com/tier"] != "gold" {
		t.Errorf("inventory = %+v", s.Inventory)
	}
	if len(s.AddressPools) != 1 || len(s.AddressPools[0].Addresses) != 3 {
		t.Errorf("pools = %+v", s.AddressPools)
	}
	if len(cfg.Nodes.Rules) != 1 || !cfg.Nodes.Rules[0].Matches("bm-7", nil) || cfg.Nodes.Rules[0].Matches("vm-7", nil) {
		t.Errorf("rule does not match as written: %+v", cfg.Nodes.Rules)
	}
}

func TestDefaults(t *testing.T) {
	cfg := mustParse(t, header+"backends:"+metal)
	if cfg.Nodes.Unmanaged != config.UnmanagedError {
		t.Errorf("nodes.unmanaged defaults to %q, want error", cfg.Nodes.Unmanaged)
	}
	if cfg.LoadBalancer.DefaultBackend != "" {
		t.Errorf("loadBalancer.defaultBackend defaults to %q, want empty (un-annotated Services left to others)", cfg.LoadBalancer.DefaultBackend)
	}
	s := cfg.Backends[0].Settings.(*bmconfig.Settings)
	if a := s.AddressPools[0].AutoAssign; a == nil || !*a {
		t.Errorf("addressPools[0].autoAssign defaults to %v, want true", a)
	}
	cfg = mustParse(t, header+"nodes: {unmanaged: ignore}\nbackends:"+metal)
	if cfg.Nodes.Unmanaged != config.UnmanagedIgnore {
		t.Errorf("nodes.unmanaged = %q, want ignore", cfg.Nodes.Unmanaged)
	}
}

// TestDecodeErrors: a document that cannot be decoded as written is refused
// with an error naming the path of the offending key and the fix.
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"empty file", "  \n", []string{"apiVersion", "empty"}},
		{"not YAML", "clusterID: [demo\n", []string{"not valid YAML"}},
		{"unknown top-level key", header + "clusterId: demo2\nbackends:" + metal,
			[]string{`clusterId`, "unknown field", "remove it or fix its spelling"}},
		{"misspelt nested key", header + "loadBalancer: {defaultbackend: metal}\nbackends:" + metal,
			[]string{`loadBalancer.defaultbackend`, "unknown field"}},
		{"misspelt rule key", header + "nodes: {rules: [{backend: metal, nodeNameRegexp: '^bm-'}]}\nbackends:" + metal,
			[]string{`nodes.rules[0].nodeNameRegexp`}},
		{"misspelt backend key", header + "backends:\n- name: metal\n  typ: baremetal\n",
			[]string{`backends[0].typ`}},
		{"misspelt key inside a backend section", header + `backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: bm-1
      zonee: rack-a
`, []string{`backends[0].baremetal.inventory[0].zonee`, "unknown field"}},
		{"misspelt key inside a pool", header + `backends:
- name: metal
  type: baremetal
  baremetal:
    addressPools:
    - name: public
      adresses: ["192.0.2.0/28"]
`, []string{`backends[0].baremetal.addressPools[0].adresses`}},
		{"duplicate key", header + "clusterID: other\nbackends:" + metal, []string{"clusterID", "already set"}},
		{"wrong type", header + "backends: {name: metal}\n", []string{"backends", "must be a list"}},
		{"wrong scalar type", "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: [a, b]\nbackends:" + metal,
			[]string{"clusterID", "must be a string"}},
		{"wrong type inside a section", header + `backends:
- name: metal
  type: baremetal
  baremetal:
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28"]
      autoAssign: sometimes
`, []string{"backends[0].baremetal", "autoAssign", "true or false"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.doc), t.TempDir())
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("Parse returned a config with its error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestValidationReportsEverything: one run lists every problem, each under
// its field path, so a user fixes the file in one go.
func TestValidationReportsEverything(t *testing.T) {
	doc := `apiVersion: multicloud-ccm.io/v1
kind: Config
loadBalancer:
  defaultBackend: nowhere
nodes:
  unmanaged: delete
  rules:
  - backend: ghost
    nodeNameRegex: '^bm-('
  - backend: metal
  - backend: metal
    matchLabels: {"bad key!": x}
backends:
- name: Metal_1
  type: baremetal
  baremetal:
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28"]
- name: metal
  type: baremetal
  baremetal:
    addressPools:
    - name: public
      addresses: ["192.0.2.300"]
- name: metal
  type: baremetal
- name: cloud
  type: gcp
- name: mixed
  type: baremetal
  vsphere: {}
  baremetal:
    addressPools:
    - name: p
      addresses: ["203.0.113.0/28"]
`
	_, err := config.Parse([]byte(doc), t.TempDir())
	if err == nil {
		t.Fatal("Parse accepted an invalid config")
	}
	msg := err.Error()
	for _, want := range []string{
		"apiVersion: Invalid value", "must be multicloud-ccm.io/v1alpha1",
		"kind: Invalid value", "must be CloudConfig",
		"clusterID: Required value",
		"loadBalancer.defaultBackend: Unsupported value: \"nowhere\"",
		"nodes.unmanaged: Unsupported value: \"delete\"",
		"nodes.rules[0].backend: Unsupported value: \"ghost\"",
		"nodes.rules[0].nodeNameRegex: Invalid value",
		"nodes.rules[1]: Required value: a rule needs nodeNameRegex, matchLabels or both",
		"nodes.rules[2].matchLabels: Invalid value",
		"backends[0].name: Invalid value: \"Metal_1\"",
		"backends[1].baremetal.addressPools[0].addresses[0]: Invalid value: \"192.0.2.300\"",
		"backends[2].name: Duplicate value: \"metal\"",
		"backends[2].baremetal: Required value",
		"backends[3].type: Unsupported value: \"gcp\"",
		"backends[4].vsphere: Forbidden", `remove "vsphere"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not report %q:\n%s", want, msg)
		}
	}
}

func TestValidBackendNames(t *testing.T) {
	for _, doc := range []string{
		header + "backends: []\n",
		header,
	} {
		_, err := config.Parse([]byte(doc), "")
		if err == nil || !strings.Contains(err.Error(), "backends: Required value") {
			t.Errorf("no backends: err = %v", err)
		}
	}
}

func TestNodeRuleMatches(t *testing.T) {
	tests := []struct {
		name   string
		regex  string
		labels map[string]string
		node   string
		nl     map[string]string
		want   bool
	}{
		{"name only, match", "^bm-", nil, "bm-1", nil, true},
		{"name only, miss", "^bm-", nil, "vm-1", nil, false},
		{"labels only, match", "", map[string]string{"rack": "a"}, "x", map[string]string{"rack": "a", "o": "p"}, true},
		{"labels only, wrong value", "", map[string]string{"rack": "a"}, "x", map[string]string{"rack": "b"}, false},
		{"labels only, missing", "", map[string]string{"rack": "a"}, "x", nil, false},
		{"both must match", "^bm-", map[string]string{"rack": "a"}, "bm-1", map[string]string{"rack": "b"}, false},
		{"both match", "^bm-", map[string]string{"rack": "a"}, "bm-1", map[string]string{"rack": "a"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := config.NewNodeRule("metal", tc.regex, tc.labels)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Matches(tc.node, tc.nl); got != tc.want {
				t.Errorf("Matches(%q, %v) = %v, want %v", tc.node, tc.nl, got, tc.want)
			}
		})
	}
	if _, err := config.NewNodeRule("metal", "(", nil); err == nil {
		t.Error("NewNodeRule accepted a bad regular expression")
	}
}

func TestLoad(t *testing.T) {
	if _, err := config.Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "reading cloud-config") {
		t.Errorf("missing file: err = %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "cloud.yaml")
	if err := os.WriteFile(path, []byte(header+"backends:"+metal), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err != nil {
		t.Errorf("Load: %v", err)
	}
}

func TestRegisteredTypes(t *testing.T) {
	types := config.RegisteredTypes()
	found := false
	for _, ty := range types {
		found = found || ty == "baremetal"
	}
	if !found {
		t.Errorf("RegisteredTypes() = %v, want baremetal among them", types)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering baremetal twice did not panic")
		}
	}()
	config.RegisterSection("baremetal", bmconfig.ParseSection)
}
