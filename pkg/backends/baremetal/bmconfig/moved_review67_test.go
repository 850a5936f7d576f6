package bmconfig

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// review67Golden is what the code before the move (fe748e8,
// pkg/backends/baremetal/config.go) answered for each section, message for
// message and path for path: ParseSection's aggregate error at
// backends[0].baremetal.
var review67Golden = [][2]string{
	{"{}",
		"backends[0].baremetal: Required value: set inventory (the machines this backend owns), addressPools (load-balancer addresses) or both"},
	{"inventory: [{name: a}]\ninventry: []",
		"backends[0].baremetal.inventry: Forbidden: unknown field: remove it or fix its spelling (did you mean \"inventory\"?)"},
	{"inventory: [{name: a}, {name: a}]",
		"backends[0].baremetal.inventory[1].name: Duplicate value: \"a\""},
	{"inventory: [{name: Bad_Name}]",
		"backends[0].baremetal.inventory[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*') (it must be a valid Node name)"},
	{"inventory: [{zone: a}]",
		"backends[0].baremetal.inventory[0].name: Required value: set the Node name of this machine"},
	{"inventory: [{name: a, addresses: [{type: PublicIP, address: 1.2.3.4}]}]",
		"backends[0].baremetal.inventory[0].addresses[0].type: Unsupported value: \"PublicIP\": supported values: \"InternalIP\", \"ExternalIP\", \"Hostname\", \"InternalDNS\", \"ExternalDNS\""},
	{"inventory: [{name: a, addresses: [{type: InternalIP, address: 10.0.0.300}]}]",
		"backends[0].baremetal.inventory[0].addresses[0].address: Invalid value: \"10.0.0.300\": an address of type InternalIP must be a plain IPv4 or IPv6 address, e.g. 10.0.0.11"},
	{"inventory: [{name: a, addresses: [{type: InternalIP}]}]",
		"backends[0].baremetal.inventory[0].addresses[0].address: Required value: set the address"},
	{"inventory: [{name: a, addresses: [{type: InternalIP, address: 10.0.0.1}]}, {name: b, addresses: [{type: InternalIP, address: 10.0.0.1}]}]",
		"backends[0].baremetal.inventory[1].addresses[0].address: Invalid value: \"10.0.0.1\": already an address of inventory entry \"a\"; two machines cannot share an address"},
	{"inventory: [{name: a, zone: 'rack a', region: 'r/1', instanceType: 'x y'}]",
		"[backends[0].baremetal.inventory[0].zone: Invalid value: \"rack a\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?') (it becomes a Node label value), backends[0].baremetal.inventory[0].region: Invalid value: \"r/1\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?') (it becomes a Node label value), backends[0].baremetal.inventory[0].instanceType: Invalid value: \"x y\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?') (it becomes a Node label value)]"},
	{"inventory: [{name: a, labels: {node.kubernetes.io/x: 'y', k8s.io/z: 'w'}}]",
		"[backends[0].baremetal.inventory[0].labels[k8s.io/z]: Forbidden: labels under kubernetes.io and k8s.io are dropped by the node controller, and multicloud-ccm.io/backend is set by multicloud-ccm; use a prefix of your own, e.g. example.com/, backends[0].baremetal.inventory[0].labels[node.kubernetes.io/x]: Forbidden: labels under kubernetes.io and k8s.io are dropped by the node controller, and multicloud-ccm.io/backend is set by multicloud-ccm; use a prefix of your own, e.g. example.com/]"},
	{"inventory: [{name: a, labels: {multicloud-ccm.io/backend: 'y'}}]",
		"backends[0].baremetal.inventory[0].labels[multicloud-ccm.io/backend]: Forbidden: labels under kubernetes.io and k8s.io are dropped by the node controller, and multicloud-ccm.io/backend is set by multicloud-ccm; use a prefix of your own, e.g. example.com/"},
	{"inventory: [{name: a, labels: {example.com/x: 'a b', 'bad key!': v}}]",
		"[backends[0].baremetal.inventory[0].labels[bad key!]: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), backends[0].baremetal.inventory[0].labels[example.com/x]: Invalid value: \"a b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?') (it becomes a Node label value)]"},
	{"addressPools: [{name: p}]",
		"backends[0].baremetal.addressPools[0].addresses: Required value: list at least one CIDR (192.0.2.0/28) or range (192.0.2.10-192.0.2.20)"},
	{"addressPools: [{name: P_1, addresses: [192.0.2.0/24]}]",
		"backends[0].baremetal.addressPools[0].name: Invalid value: \"P_1\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"},
	{"addressPools: [{name: p, addresses: [192.0.2.0/24]}, {name: p, addresses: [198.51.100.0/24]}]",
		"backends[0].baremetal.addressPools[1].name: Duplicate value: \"p\""},
	{"addressPools: [{name: p, addresses: [192.0.2.1/24]}]",
		"backends[0].baremetal.addressPools[0].addresses[0]: Invalid value: \"192.0.2.1/24\": \"192.0.2.1/24\" has host bits set; did you mean 192.0.2.0/24?"},
	{"addressPools: [{name: p, addresses: [192.0.2.9-192.0.2.1]}]",
		"backends[0].baremetal.addressPools[0].addresses[0]: Invalid value: \"192.0.2.9-192.0.2.1\": range 192.0.2.9-192.0.2.1 ends before it starts; write 192.0.2.1-192.0.2.9"},
	{"addressPools: [{name: p, addresses: ['192.0.2.1-2001:db8::1']}]",
		"backends[0].baremetal.addressPools[0].addresses[0]: Invalid value: \"192.0.2.1-2001:db8::1\": range 192.0.2.1-2001:db8::1 mixes IPv4 and IPv6; write one range per family"},
	{"addressPools: [{name: p, addresses: [192.0.2.1]}]",
		"backends[0].baremetal.addressPools[0].addresses[0]: Invalid value: \"192.0.2.1\": \"192.0.2.1\" is a single address; write it as 192.0.2.1/32"},
	{"addressPools: [{name: p, addresses: [192.0.2.0/24], namespaces: [Team_A, a, a]}]",
		"[backends[0].baremetal.addressPools[0].namespaces[0]: Invalid value: \"Team_A\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?') (it must be a namespace name), backends[0].baremetal.addressPools[0].namespaces[2]: Duplicate value: \"a\"]"},
	{"addressPools: [{name: a, addresses: [192.0.2.0/24]}, {name: b, addresses: [192.0.2.100-192.0.2.110]}]",
		"backends[0].baremetal.addressPools[1].addresses[0]: Invalid value: \"192.0.2.100-192.0.2.110\": overlaps 192.0.2.0-192.0.2.255 of pool \"a\" (backends[0].baremetal.addressPools[0].addresses[0]); pools and their entries must not overlap"},
	{"addressPools: [{name: a, addresses: [10.0.0.0/16]}, {name: b, addresses: [10.0.0.0/30, 10.0.1.0/30]}]",
		"[backends[0].baremetal.addressPools[1].addresses[0]: Invalid value: \"10.0.0.0-10.0.0.3\": overlaps 10.0.0.0-10.0.255.255 of pool \"a\" (backends[0].baremetal.addressPools[0].addresses[0]); pools and their entries must not overlap, backends[0].baremetal.addressPools[1].addresses[1]: Invalid value: \"10.0.1.0-10.0.1.3\": overlaps 10.0.0.0-10.0.255.255 of pool \"a\" (backends[0].baremetal.addressPools[0].addresses[0]); pools and their entries must not overlap]"},
	{"addressPools: [{name: a, addresses: ['2001:db8::/64', '2001:db8::5-2001:db8::9']}]",
		"backends[0].baremetal.addressPools[0].addresses[1]: Invalid value: \"2001:db8::5-2001:db8::9\": overlaps 2001:db8::-2001:db8::ffff:ffff:ffff:ffff of pool \"a\" (backends[0].baremetal.addressPools[0].addresses[0]); pools and their entries must not overlap"},
	{"addressPools: [{name: a, addresses: [127.0.0.0/8, 0.0.0.0/0, 'fe80::/64', 224.0.0.0/28]}]",
		"[backends[0].baremetal.addressPools[0].addresses[0]: Invalid value: \"127.0.0.0/8\": \"127.0.0.0/8\" is an unspecified, loopback, multicast or link-local address, which cannot be load-balancer addresses, backends[0].baremetal.addressPools[0].addresses[1]: Invalid value: \"0.0.0.0/0\": \"0.0.0.0/0\" is an unspecified, loopback, multicast or link-local address, which cannot be load-balancer addresses, backends[0].baremetal.addressPools[0].addresses[2]: Invalid value: \"fe80::/64\": \"fe80::/64\" is an unspecified, loopback, multicast or link-local address, which cannot be load-balancer addresses, backends[0].baremetal.addressPools[0].addresses[3]: Invalid value: \"224.0.0.0/28\": \"224.0.0.0/28\" is an unspecified, loopback, multicast or link-local address, which cannot be load-balancer addresses]"},
	{"addressPools: [{name: p, addresses: [192.0.2.0/30], priority: -1, serviceSelectors: [{matchExpressions: [{key: tier, operator: Bogus}]}], namespaceSelectors: [{matchLabels: {'bad key!': x}}]}]",
		"[backends[0].baremetal.addressPools[0].namespaceSelectors[0]: Invalid value: \"&LabelSelector{MatchLabels:map[string]string{bad key!: x,},MatchExpressions:[]LabelSelectorRequirement{},}\": key: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), backends[0].baremetal.addressPools[0].serviceSelectors[0]: Invalid value: \"&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,Operator:Bogus,Values:[],},},}\": \"Bogus\" is not a valid label selector operator, backends[0].baremetal.addressPools[0].priority: Invalid value: -1: must be 0 (no priority) or positive; lower is tried first]"},
	{"announce: bgp\ninventory: [{name: bm-1}]",
		"[backends[0].baremetal.announce: Unsupported value: \"bgp\": supported values: \"kube-vip\", backends[0].baremetal.announce: Invalid value: \"bgp\": announces load-balancer addresses: set addressPools too, or remove it]"},
	{"announce: kube-vip\ninventory: [{name: bm-1}]",
		"backends[0].baremetal.announce: Invalid value: \"kube-vip\": announces load-balancer addresses: set addressPools too, or remove it"},
	{"inventory: [{name: a, zone: 'x y'}]\naddressPools: [{name: p, addresses: [bogus]}]",
		"[backends[0].baremetal.inventory[0].zone: Invalid value: \"x y\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?') (it becomes a Node label value), backends[0].baremetal.addressPools[0].addresses[0]: Invalid value: \"bogus\": \"bogus\" is neither a CIDR (192.0.2.0/28) nor a range (192.0.2.10-192.0.2.20)]"},
}

// TestReview67MessagesAsBeforeTheMove: every section is refused with the
// same errors, in the same order and at the same field paths, as before the
// section moved into bmconfig.
func TestReview67MessagesAsBeforeTheMove(t *testing.T) {
	for _, g := range review67Golden {
		js, err := yaml.YAMLToJSON([]byte(g[0]))
		if err != nil {
			t.Fatalf("test YAML %q: %v", g[0], err)
		}
		v, errs := ParseSection(js, field.NewPath("backends").Index(0).Child("baremetal"), "/etc")
		if v != nil || errs.ToAggregate() == nil {
			t.Errorf("section %q parsed (%v), want the errors %q", g[0], v, g[1])
			continue
		}
		if got := errs.ToAggregate().Error(); got != g[1] {
			t.Errorf("section %q:\n got %s\nwant %s", g[0], got, g[1])
		}
	}
}

// TestReview67PoolOrderAsBefore: ComparePools orders as the old poolOrder
// did (MetalLB's): pools with a priority by priority, then the other
// restricted pools, then the unrestricted ones, config order breaking ties.
func TestReview67PoolOrderAsBefore(t *testing.T) {
	section := `
addressPools:
- {name: open-1, addresses: [192.0.2.0/30]}
- {name: ns-only, addresses: [192.0.2.4/30], namespaces: [team-a]}
- {name: prio-3, addresses: [192.0.2.8/30], priority: 3}
- {name: sel-only, addresses: [192.0.2.12/30], serviceSelectors: [{matchLabels: {tier: gold}}]}
- {name: prio-1, addresses: [192.0.2.16/30], namespaces: [team-b], priority: 1}
- {name: open-2, addresses: [192.0.2.20/30], autoAssign: false}
- {name: prio-3b, addresses: [192.0.2.24/30], priority: 3}
- {name: empty-ns, addresses: [192.0.2.28/30], namespaces: []}
- {name: nssel, addresses: [192.0.2.32/30], namespaceSelectors: [{}]}
`
	js, err := yaml.YAMLToJSON([]byte(section))
	if err != nil {
		t.Fatal(err)
	}
	v, errs := ParseSection(js, field.NewPath("baremetal"), "")
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	pools := slices.Clone(v.(*Settings).Compiled().Pools)
	slices.SortStableFunc(pools, ComparePools)
	var got []string
	for _, p := range pools {
		got = append(got, p.Name)
	}
	// namespaces: [] decodes to an empty list: no namespace map, so
	// empty-ns is unrestricted, as before.
	want := []string{"prio-1", "prio-3", "prio-3b", "ns-only", "sel-only", "nssel", "open-1", "open-2", "empty-ns"}
	if !slices.Equal(got, want) {
		t.Errorf("pool order %v, want %v (the old poolOrder's)", got, want)
	}
}

// TestReview67CompiledNilAfterFailedValidate: Compiled's doc says it is nil
// when the settings "did not validate". Settings that validated once and
// were then changed so that Validate fails still return the old compiled
// form, which New and PrepareReconfigure (they validate only when Compiled
// is nil) then build a backend from.
func TestReview67CompiledNilAfterFailedValidate(t *testing.T) {
	s := &Settings{AddressPools: []AddressPool{{Name: "p", Addresses: []string{"192.0.2.0/30"}}}}
	if errs := s.Validate(field.NewPath("baremetal")); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	s.AddressPools[0].Addresses = []string{"bogus"}
	if errs := s.Validate(field.NewPath("baremetal")); len(errs) == 0 {
		t.Fatal("Validate accepted address bogus")
	}
	if c := s.Compiled(); c != nil {
		t.Errorf("after a failed Validate, Compiled() = %d pools (the previous validation's), want nil (\"did not validate\")", len(c.Pools))
	}
}

// TestReview67CompiledIsNotChangedByTheSettings: Compiled's doc says it "is
// not changed once made". Its Inventory points into the Settings'
// Inventory slice, so an edit of the Settings (a caller's, or a second
// Validate's defaults) changes the compiled form, and the Instances of
// every backend built from it, without a Validate.
func TestReview67CompiledIsNotChangedByTheSettings(t *testing.T) {
	s := &Settings{Inventory: []InventoryEntry{{Name: "bm-1", Zone: "rack-a", Labels: map[string]string{"example.com/tier": "gold"}}}}
	if errs := s.Validate(field.NewPath("baremetal")); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	c := s.Compiled()
	s.Inventory[0].Zone = "rack b"
	s.Inventory[0].Labels["node.kubernetes.io/x"] = "y"
	if e := c.Inventory["bm-1"]; e.Zone != "rack-a" || len(e.Labels) != 1 {
		t.Errorf("after the Settings changed (unvalidated: zone %q, a reserved label), the compiled entry reads zone %q labels %v; want it unchanged (rack-a, 1 label)", s.Inventory[0].Zone, e.Zone, e.Labels)
	}
}

// TestReview67CrossCheckAcrossSections: two baremetal sections whose
// pools overlap are refused by CheckPoolsAcross, registered here the way
// pkg/config's tests register it, with the message the backend gave before
// the move; and sections that are not *Settings are skipped.
func TestReview67CrossCheckAcrossSections(t *testing.T) {
	parse := func(i int, sec string) any {
		js, err := yaml.YAMLToJSON([]byte(sec))
		if err != nil {
			t.Fatal(err)
		}
		v, errs := ParseSection(js, field.NewPath("backends").Index(i).Child("baremetal"), "")
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		return v
	}
	a := parse(0, "addressPools: [{name: a, addresses: [192.0.2.0/28]}]")
	b := parse(2, "addressPools: [{name: x, addresses: [198.51.100.0/24]}, {name: b, addresses: [192.0.2.8-192.0.2.20]}]")
	errs := CheckPoolsAcross([]config.Section{
		{Backend: "metal-a", Path: field.NewPath("backends").Index(0).Child("baremetal"), Settings: a},
		{Backend: "other", Path: field.NewPath("backends").Index(1).Child("aws"), Settings: struct{}{}},
		{Backend: "metal-b", Path: field.NewPath("backends").Index(2).Child("baremetal"), Settings: b},
	})
	want := `backends[2].baremetal.addressPools[1].addresses[0]: Invalid value: "192.0.2.8-192.0.2.20": overlaps 192.0.2.0-192.0.2.15 of backend "metal-a" (backends[0].baremetal.addressPools[0].addresses[0]): two baremetal backends would hand out the same addresses; give each backend its own addresses`
	if got := errs.ToAggregate(); got == nil || got.Error() != want {
		t.Errorf("CheckPoolsAcross = %v\nwant %s", got, want)
	}
}
