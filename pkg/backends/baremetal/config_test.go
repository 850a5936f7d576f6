package baremetal

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

const validSection = `
inventory:
- name: bm-1
  addresses: [{type: InternalIP, address: 10.0.0.11}, {type: Hostname, address: bm-1}]
  zone: rack-a
  region: dc-1
  instanceType: r650
  labels: {example.com/tier: gold}
- name: bm-2
  addresses: [{type: InternalIP, address: 10.0.0.12}, {type: InternalIP, address: "fd00::12"}]
addressPools:
- name: public
  addresses: ["192.0.2.0/28", "198.51.100.10-198.51.100.20", "2001:db8::/120"]
  namespaces: []
  autoAssign: true
- name: reserved
  addresses: ["203.0.113.0/30"]
  namespaces: [team-a]
  autoAssign: false
`

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

func TestParseSectionValid(t *testing.T) {
	s, errs := parseYAML(t, validSection)
	if len(errs) > 0 {
		t.Fatalf("ParseSection: %v", errs.ToAggregate())
	}
	if got := len(s.compiled.inventory); got != 2 {
		t.Errorf("inventory has %d entries, want 2", got)
	}
	public, reserved := s.compiled.pools[0], s.compiled.pools[1]
	if !public.autoAssign || public.namespaces != nil {
		t.Errorf("pool public: autoAssign=%v namespaces=%v, want true and any namespace", public.autoAssign, public.namespaces)
	}
	if reserved.autoAssign || !reserved.allows(target{namespace: "team-a"}) || reserved.allows(target{namespace: "default"}) {
		t.Errorf("pool reserved: autoAssign=%v namespaces=%v, want false and team-a only", reserved.autoAssign, reserved.namespaces)
	}
	ps := newPoolState(public)
	// 192.0.2.0/28 less network and broadcast (14) + 11 in the range; 256 IPv6.
	if v4, v6 := ps.fams[0].size, ps.fams[1].size; v4 != 14+11 || v6 != 256 {
		t.Errorf("pool public sizes: IPv4 %d, IPv6 %d; want 25 and 256", v4, v6)
	}
}

func TestParseSectionDefaultsAutoAssign(t *testing.T) {
	s, errs := parseYAML(t, "addressPools:\n- name: p\n  addresses: [192.0.2.0/24]\n")
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if a := s.AddressPools[0].AutoAssign; a == nil || !*a || !s.compiled.pools[0].autoAssign {
		t.Errorf("autoAssign not defaulted to true: %v", a)
	}
}

func TestParseSectionErrors(t *testing.T) {
	tests := []struct {
		name    string
		section string
		// want are substrings each of which some error must contain.
		want []string
	}{
		{name: "empty", section: "{}", want: []string{"backends[0].baremetal", "set inventory"}},
		{name: "unknown key", section: "inventory: [{name: a}]\ninventry: []", want: []string{"inventry", "fix its spelling"}},
		{name: "duplicate node", section: "inventory: [{name: a}, {name: a}]", want: []string{"inventory[1].name", "Duplicate"}},
		{name: "bad node name", section: "inventory: [{name: Bad_Name}]", want: []string{"inventory[0].name", "valid Node name"}},
		{name: "missing node name", section: "inventory: [{zone: a}]", want: []string{"inventory[0].name", "Required"}},
		{name: "bad address type", section: "inventory: [{name: a, addresses: [{type: PublicIP, address: 1.2.3.4}]}]", want: []string{"addresses[0].type", "InternalIP"}},
		{name: "bad address", section: "inventory: [{name: a, addresses: [{type: InternalIP, address: 10.0.0.300}]}]", want: []string{"addresses[0].address", "plain IPv4 or IPv6"}},
		{name: "hostname not parsed", section: "inventory: [{name: a, addresses: [{type: Hostname, address: a.example.com}]}]"},
		{name: "shared machine address", section: "inventory: [{name: a, addresses: [{type: InternalIP, address: 10.0.0.1}]}, {name: b, addresses: [{type: InternalIP, address: 10.0.0.1}]}]", want: []string{"inventory[1].addresses[0].address", `inventory entry "a"`}},
		{name: "bad zone", section: "inventory: [{name: a, zone: 'rack a'}]", want: []string{"inventory[0].zone"}},
		{name: "reserved label", section: "inventory: [{name: a, labels: {node.kubernetes.io/x: 'y'}}]", want: []string{"labels[node.kubernetes.io/x]", "prefix of your own"}},
		{name: "backend label", section: "inventory: [{name: a, labels: {multicloud-ccm.io/backend: 'y'}}]", want: []string{"labels[multicloud-ccm.io/backend]"}},
		{name: "bad label value", section: "inventory: [{name: a, labels: {example.com/x: 'a b'}}]", want: []string{"labels[example.com/x]"}},
		{name: "pool without addresses", section: "addressPools: [{name: p}]", want: []string{"addressPools[0].addresses", "at least one"}},
		{name: "bad pool name", section: "addressPools: [{name: P_1, addresses: [192.0.2.0/24]}]", want: []string{"addressPools[0].name"}},
		{name: "duplicate pool", section: "addressPools: [{name: p, addresses: [192.0.2.0/24]}, {name: p, addresses: [198.51.100.0/24]}]", want: []string{"addressPools[1].name", "Duplicate"}},
		{name: "host bits", section: "addressPools: [{name: p, addresses: [192.0.2.1/24]}]", want: []string{"addresses[0]", "did you mean 192.0.2.0/24"}},
		{name: "reversed range", section: "addressPools: [{name: p, addresses: [192.0.2.9-192.0.2.1]}]", want: []string{"write 192.0.2.1-192.0.2.9"}},
		{name: "mixed range", section: "addressPools: [{name: p, addresses: ['192.0.2.1-2001:db8::1']}]", want: []string{"mixes IPv4 and IPv6"}},
		{name: "bare address", section: "addressPools: [{name: p, addresses: [192.0.2.1]}]", want: []string{"192.0.2.1/32"}},
		{name: "bad namespace", section: "addressPools: [{name: p, addresses: [192.0.2.0/24], namespaces: [Team_A]}]", want: []string{"namespaces[0]", "namespace name"}},
		{name: "overlap across pools", section: "addressPools: [{name: a, addresses: [192.0.2.0/24]}, {name: b, addresses: [192.0.2.100-192.0.2.110]}]",
			want: []string{"addressPools[1].addresses[0]", `pool "a"`, "addressPools[0].addresses[0]"}},
		{name: "overlap hidden behind a smaller entry", section: "addressPools: [{name: a, addresses: [10.0.0.0/16]}, {name: b, addresses: [10.0.0.0/30, 10.0.1.0/30]}]",
			want: []string{"addressPools[1].addresses[0]", "addressPools[1].addresses[1]"}},
		{name: "overlap within pool", section: "addressPools: [{name: a, addresses: ['2001:db8::/64', '2001:db8::5-2001:db8::9']}]", want: []string{`pool "a"`}},
		{name: "loopback pool", section: "addressPools: [{name: a, addresses: [127.0.0.0/8]}]", want: []string{"loopback"}},
		{name: "all problems at once", section: "inventory: [{name: a, zone: 'x y'}]\naddressPools: [{name: p, addresses: [bogus]}]", want: []string{"inventory[0].zone", "addressPools[0].addresses[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, errs := parseYAML(t, tt.section)
			if len(tt.want) == 0 {
				if len(errs) > 0 || s == nil {
					t.Fatalf("want no error, got %v", errs.ToAggregate())
				}
				return
			}
			if s != nil || len(errs) == 0 {
				t.Fatalf("want errors containing %q, got settings %+v", tt.want, s)
			}
			msg := errs.ToAggregate().Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("errors %q do not contain %q", msg, w)
				}
			}
		})
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
