package baremetal

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/bmconfig"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/bmconfig/bmconfigtest"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

const validSection = bmconfigtest.ValidSection

func parseYAML(t testing.TB, section string) (*Settings, field.ErrorList) {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(section))
	if err != nil {
		t.Fatalf("test YAML: %v", err)
	}
	v, errs := ParseSection(js, field.NewPath("backends").Index(0).Child("baremetal"), "/etc/ccm")
	if v == nil {
		return nil, errs
	}
	return v.(*Settings), errs
}

// TestParsedPoolSizes: a parsed pool's usable addresses, per family, are
// what the allocator hands out.
func TestParsedPoolSizes(t *testing.T) {
	s, errs := parseYAML(t, validSection)
	if len(errs) > 0 {
		t.Fatalf("ParseSection: %v", errs.ToAggregate())
	}
	ps := newPoolState(s.Compiled().Pools[0])
	// 192.0.2.0/28 less network and broadcast (14) + 11 in the range; 256 IPv6.
	if v4, v6 := ps.fams[0].size, ps.fams[1].size; v4 != 14+11 || v6 != 256 {
		t.Errorf("pool public sizes: IPv4 %d, IPv6 %d; want 25 and 256", v4, v6)
	}
}

func TestSectionRegistered(t *testing.T) {
	doc := "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: c1\nbackends:\n- name: metal\n  type: baremetal\n  baremetal:\n" + indent(validSection, "    ")
	cfg, err := config.Parse([]byte(doc), "/etc/ccm")
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	if _, ok := cfg.Backends[0].Settings.(*Settings); !ok {
		t.Fatalf("settings are %T, want *Settings", cfg.Backends[0].Settings)
	}
}

// TestRegistersBMConfig: the backend registers bmconfig's section parser
// and cross-section check, the two pkg/config's tests register themselves
// (without this package) to parse baremetal sections as the binary does.
func TestRegistersBMConfig(t *testing.T) {
	r, ok := backends.Lookup(Type)
	if !ok {
		t.Fatal("baremetal is not registered")
	}
	same := func(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	if !same(r.Parse, bmconfig.ParseSection) || !same(r.CrossValidate, bmconfig.CheckPoolsAcross) {
		t.Error("the registration's Parse and CrossValidate are not bmconfig.ParseSection and bmconfig.CheckPoolsAcross")
	}
}

// TestNodeBackendLabel: bmconfig's copy of the label name, which inventory
// labels may not set, is annotation.NodeBackend.
func TestNodeBackendLabel(t *testing.T) {
	if bmconfig.NodeBackendLabel != string(annotation.NodeBackend) {
		t.Errorf("bmconfig.NodeBackendLabel = %q, want %q", bmconfig.NodeBackendLabel, annotation.NodeBackend)
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestPoolsOverlapAcrossBackends: two baremetal backends whose pools overlap
// would hand out the same address; config validation refuses them, naming
// both entries' paths. Disjoint pools, and backends without pools, pass.
func TestPoolsOverlapAcrossBackends(t *testing.T) {
	backend := func(name, pools string) string {
		return "- name: " + name + "\n  type: baremetal\n  baremetal:\n    addressPools:\n" + indent(pools, "    ")
	}
	doc := func(backends ...string) string {
		return "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: c1\nbackends:\n" + strings.Join(backends, "")
	}
	site1 := backend("site-1", "- {name: a, addresses: [192.0.2.0/28, 2001:db8::/120]}")
	site2 := backend("site-2", "- {name: b, addresses: [198.51.100.0/24]}\n- {name: c, addresses: [192.0.2.10-192.0.2.20]}")
	site3 := backend("site-3", "- {name: d, addresses: [\"2001:db8::80/121\"]}")
	_, err := config.Parse([]byte(doc(site1, site2, site3)), "/etc/ccm")
	if err == nil {
		t.Fatal("overlapping pools of two backends passed validation")
	}
	for _, want := range []string{
		`backends[1].baremetal.addressPools[1].addresses[0]: Invalid value: "192.0.2.10-192.0.2.20": overlaps 192.0.2.0-192.0.2.15 of backend "site-1" (backends[0].baremetal.addressPools[0].addresses[0])`,
		`backends[2].baremetal.addressPools[0].addresses[0]: Invalid value: "2001:db8::80-2001:db8::ff": overlaps 2001:db8::-2001:db8::ff of backend "site-1" (backends[0].baremetal.addressPools[0].addresses[1])`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "198.51.100") {
		t.Errorf("disjoint entries reported: %v", err)
	}

	inventoryOnly := "- name: inv\n  type: baremetal\n  baremetal:\n    inventory: [{name: bm-1}]\n"
	if _, err := config.Parse([]byte(doc(site1, backend("site-2", "- {name: b, addresses: [192.0.2.16/28]}"), inventoryOnly)), "/etc/ccm"); err != nil {
		t.Errorf("disjoint pools refused: %v", err)
	}
}
