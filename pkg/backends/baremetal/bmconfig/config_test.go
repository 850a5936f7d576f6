package bmconfig

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/bmconfig/bmconfigtest"
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

func TestParseSectionValid(t *testing.T) {
	s, errs := parseYAML(t, validSection)
	if len(errs) > 0 {
		t.Fatalf("ParseSection: %v", errs.ToAggregate())
	}
	if got := len(s.Compiled().Inventory); got != 2 {
		t.Errorf("inventory has %d entries, want 2", got)
	}
	public, reserved := s.Compiled().Pools[0], s.Compiled().Pools[1]
	if !public.AutoAssign || public.Namespaces != nil {
		t.Errorf("pool public: autoAssign=%v namespaces=%v, want true and any namespace", public.AutoAssign, public.Namespaces)
	}
	if reserved.AutoAssign || !reserved.Allows(Target{Namespace: "team-a"}) || reserved.Allows(Target{Namespace: "default"}) {
		t.Errorf("pool reserved: autoAssign=%v namespaces=%v, want false and team-a only", reserved.AutoAssign, reserved.Namespaces)
	}
	// The pool sizes the allocator sees: package baremetal's
	// TestParsedPoolSizes.
}

func TestParseSectionDefaultsAutoAssign(t *testing.T) {
	s, errs := parseYAML(t, "addressPools:\n- name: p\n  addresses: [192.0.2.0/24]\n")
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if a := s.AddressPools[0].AutoAssign; a == nil || !*a || !s.Compiled().Pools[0].AutoAssign {
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

// TestServiceAllocationValidation: every bad selector and priority is
// named by its path.
func TestServiceAllocationValidation(t *testing.T) {
	_, errs := parseYAML(t, `
addressPools:
- name: p
  addresses: ["192.0.2.0/30"]
  priority: -1
  serviceSelectors: [{matchExpressions: [{key: tier, operator: Bogus}]}]
  namespaceSelectors: [{matchLabels: {"bad key!": x}}]
`)
	got := fmt.Sprint(errs.ToAggregate())
	for _, want := range []string{"addressPools[0].priority", "addressPools[0].serviceSelectors[0]", "addressPools[0].namespaceSelectors[0]"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q do not name %s", got, want)
		}
	}
}

// TestAnnounceValidation: announce takes only kube-vip, and needs pools.
func TestAnnounceValidation(t *testing.T) {
	_, errs := parseYAML(t, "announce: bgp\ninventory: [{name: bm-1}]\n")
	got := errs.ToAggregate().Error()
	for _, want := range []string{`announce: Unsupported value: "bgp"`, "set addressPools too"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q lack %q", got, want)
		}
	}
}
