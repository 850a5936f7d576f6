// Package bmconfig is the baremetal section of a backend in the
// cloud-config file: its settings, their parser and validation, and the
// address pools they compile to. Package baremetal registers ParseSection
// and CheckPoolsAcross, and builds its backend from the compiled settings.
//
// It imports no client-go, cloud-provider or backend registry, so that the
// fuzz target of pkg/config, which parses baremetal sections, builds
// quickly: hack/fuzz.sh compiles every dependency of a fuzz target's test
// binary with the fuzzer's instrumentation, and package baremetal depends
// on client-go and cloud-provider.
package bmconfig

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/addrpool"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

const (
	// Type is the backend type, and the key of its section, in the
	// cloud-config file.
	Type = "baremetal"
	// AnnounceKubeVIP is the announce value under which the backend writes
	// its addresses where kube-vip reads them.
	AnnounceKubeVIP = "kube-vip"
	// NodeBackendLabel is the Node label naming a Node's backend, exactly
	// as annotation.NodeBackend (the docs are generated from that; a test
	// in package baremetal keeps the two equal). An inventory entry may not
	// set it.
	NodeBackendLabel = "multicloud-ccm.io/backend"
)

// Settings is the baremetal section of a backend in the cloud-config file.
// At least one of Inventory and AddressPools is set.
type Settings struct {
	// Inventory lists the machines this backend owns, one per Node.
	Inventory []InventoryEntry `json:"inventory,omitempty"`
	// AddressPools are the addresses the backend hands to Services of type
	// LoadBalancer. No two pools (nor two entries of one pool) overlap.
	AddressPools []AddressPool `json:"addressPools,omitempty"`
	// Announce, when "kube-vip", makes the backend also write the addresses
	// it assigns to the Service's kube-vip.io/loadbalancerIPs annotation
	// (and remove them on release), so kube-vip in services mode announces
	// automatically assigned addresses too. Empty (the default): the
	// backend writes only the Service's status.
	Announce string `json:"announce,omitempty"`

	// compiled is set by Validate.
	compiled *Compiled
}

// InventoryEntry is one machine. Its Node's providerID is
// baremetal://<name>.
type InventoryEntry struct {
	// Name is the Node name (a DNS-1123 subdomain), unique in the inventory.
	Name string `json:"name"`
	// Addresses become the Node's status.addresses. Types are those of
	// Node addresses: InternalIP, ExternalIP, Hostname, InternalDNS,
	// ExternalDNS.
	Addresses []corev1.NodeAddress `json:"addresses,omitempty"`
	// Zone becomes the topology.kubernetes.io/zone label.
	Zone string `json:"zone,omitempty"`
	// Region becomes the topology.kubernetes.io/region label.
	Region string `json:"region,omitempty"`
	// InstanceType becomes the node.kubernetes.io/instance-type label.
	InstanceType string `json:"instanceType,omitempty"`
	// Labels are added to the Node. Keys under kubernetes.io and k8s.io are
	// refused: the node controller would drop them.
	Labels map[string]string `json:"labels,omitempty"`
}

// AddressPool is a named set of load-balancer addresses.
type AddressPool struct {
	// Name is a DNS-1123 label, unique among the backend's pools; the
	// multicloud-ccm.io/address-pool annotation names it.
	Name string `json:"name"`
	// Addresses are CIDRs (192.0.2.0/28, 2001:db8::/120) and inclusive
	// ranges (198.51.100.10-198.51.100.20), IPv4 or IPv6. The network and
	// broadcast addresses of an IPv4 CIDR of /30 or shorter are never handed
	// out; write a range to use them.
	Addresses []string `json:"addresses"`
	// Namespaces limits the pool to Services in these namespaces. Empty:
	// any namespace.
	Namespaces []string `json:"namespaces,omitempty"`
	// AutoAssign (default true) lets the backend pick addresses from the pool
	// for Services that request none. A pool with autoAssign false serves
	// only Services that request one of its addresses or name it with the
	// multicloud-ccm.io/address-pool annotation.
	AutoAssign *bool `json:"autoAssign,omitempty"`
	// NamespaceSelectors limit the pool to Services in namespaces whose
	// labels match one of them; with Namespaces, a Service whose namespace
	// is listed or matches a selector may use the pool (MetalLB's
	// serviceAllocation.namespaceSelectors).
	NamespaceSelectors []metav1.LabelSelector `json:"namespaceSelectors,omitempty"`
	// ServiceSelectors limit the pool to Services whose labels match one
	// of them (MetalLB's serviceAllocation.serviceSelectors).
	ServiceSelectors []metav1.LabelSelector `json:"serviceSelectors,omitempty"`
	// Priority orders the pools automatic allocation tries, lower first
	// (MetalLB's serviceAllocation.priority): pools with a service
	// allocation (namespaces, selectors or a priority) come before those
	// without, and among them those with a priority first, by priority.
	// 0 (the default) is no priority.
	Priority int `json:"priority,omitempty"`
}

// Compiled is the validated, parsed form of Settings, what the backend is
// built from. It is not changed once made: it holds copies, not the
// Settings' own entries.
type Compiled struct {
	// Inventory holds the inventory entries by name.
	Inventory map[string]*InventoryEntry
	// Pools are the address pools, in config order.
	Pools []*Pool
	// KubeVIP is true when Announce is kube-vip.
	KubeVIP bool
}

// Compiled returns the settings' compiled form, or nil when they were not
// validated, or did not validate.
func (s *Settings) Compiled() *Compiled { return s.compiled }

// ParseSection is the config.SectionParser of the baremetal type.
func ParseSection(raw []byte, path *field.Path, _ string) (any, field.ErrorList) {
	s := &Settings{}
	errs := config.DecodeSection(raw, path, s)
	s.setDefaults()
	if errs = append(errs, s.Validate(path)...); len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

func (s *Settings) setDefaults() {
	for i := range s.AddressPools {
		if s.AddressPools[i].AutoAssign == nil {
			t := true
			s.AddressPools[i].AutoAssign = &t
		}
	}
}

// Validate checks the settings, returning every problem found, and prepares
// them for the backend.
func (s *Settings) Validate(path *field.Path) field.ErrorList {
	s.setDefaults()
	s.compiled = nil
	var errs field.ErrorList
	if len(s.Inventory) == 0 && len(s.AddressPools) == 0 {
		errs = append(errs, field.Required(path, "set inventory (the machines this backend owns), addressPools (load-balancer addresses) or both"))
	}
	inv, ierrs := validateInventory(s.Inventory, path.Child("inventory"))
	pools, perrs := validatePools(s.AddressPools, path.Child("addressPools"))
	errs = append(append(errs, ierrs...), perrs...)
	if s.Announce != "" && s.Announce != AnnounceKubeVIP {
		errs = append(errs, field.NotSupported(path.Child("announce"), s.Announce, []string{AnnounceKubeVIP}))
	}
	if s.Announce != "" && len(s.AddressPools) == 0 {
		errs = append(errs, field.Invalid(path.Child("announce"), s.Announce, "announces load-balancer addresses: set addressPools too, or remove it"))
	}
	if len(errs) == 0 {
		s.compiled = &Compiled{Inventory: inv, Pools: pools, KubeVIP: s.Announce == AnnounceKubeVIP}
	}
	return errs
}

func validateInventory(entries []InventoryEntry, p *field.Path) (map[string]*InventoryEntry, field.ErrorList) {
	var errs field.ErrorList
	byName := make(map[string]*InventoryEntry, len(entries))
	byAddr := map[netip.Addr]string{}
	for i := range entries {
		e := &entries[i]
		ep := p.Index(i)
		errs = append(errs, validateEntry(e, ep, byAddr)...)
		if _, dup := byName[e.Name]; dup {
			errs = append(errs, field.Duplicate(ep.Child("name"), e.Name))
		}
		// The compiled form keeps a copy: it is not changed once made,
		// whatever happens to the Settings after.
		c := *e
		c.Addresses = slices.Clone(e.Addresses)
		c.Labels = maps.Clone(e.Labels)
		byName[e.Name] = &c
	}
	return byName, errs
}

func validateEntry(e *InventoryEntry, p *field.Path, byAddr map[netip.Addr]string) field.ErrorList {
	var errs field.ErrorList
	if e.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "set the Node name of this machine"))
	}
	for _, msg := range validation.IsDNS1123Subdomain(e.Name) {
		if e.Name != "" {
			errs = append(errs, field.Invalid(p.Child("name"), e.Name, msg+" (it must be a valid Node name)"))
		}
	}
	for j, a := range e.Addresses {
		errs = append(errs, validateNodeAddress(a, p.Child("addresses").Index(j), e.Name, byAddr)...)
	}
	errs = append(errs, validateLabelValue(p.Child("zone"), e.Zone)...)
	errs = append(errs, validateLabelValue(p.Child("region"), e.Region)...)
	errs = append(errs, validateLabelValue(p.Child("instanceType"), e.InstanceType)...)
	return append(errs, validateLabels(p.Child("labels"), e.Labels)...)
}

var nodeAddressTypes = []corev1.NodeAddressType{
	corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS,
}

func validateNodeAddress(a corev1.NodeAddress, p *field.Path, owner string, byAddr map[netip.Addr]string) field.ErrorList {
	if !slices.Contains(nodeAddressTypes, a.Type) {
		return field.ErrorList{field.NotSupported(p.Child("type"), a.Type, nodeAddressTypes)}
	}
	if a.Address == "" {
		return field.ErrorList{field.Required(p.Child("address"), "set the address")}
	}
	if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
		return nil
	}
	ip, err := netip.ParseAddr(a.Address)
	if err != nil || ip.Zone() != "" || ip.Is4In6() {
		return field.ErrorList{field.Invalid(p.Child("address"), a.Address, fmt.Sprintf("an address of type %s must be a plain IPv4 or IPv6 address, e.g. 10.0.0.11", a.Type))}
	}
	if prev, dup := byAddr[ip]; dup && prev != owner {
		return field.ErrorList{field.Invalid(p.Child("address"), a.Address, fmt.Sprintf("already an address of inventory entry %q; two machines cannot share an address", prev))}
	}
	byAddr[ip] = owner
	return nil
}

func validateLabelValue(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidLabelValue(v) {
		errs = append(errs, field.Invalid(p, v, msg+" (it becomes a Node label value)"))
	}
	return errs
}

func validateLabels(p *field.Path, labels map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(labels) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		if reservedLabel(k) {
			errs = append(errs, field.Forbidden(p.Key(k), "labels under kubernetes.io and k8s.io are dropped by the node controller, and "+NodeBackendLabel+" is set by multicloud-ccm; use a prefix of your own, e.g. example.com/"))
		}
		errs = append(errs, validateLabelValue(p.Key(k), labels[k])...)
	}
	return errs
}

func reservedLabel(key string) bool {
	if key == NodeBackendLabel {
		return true
	}
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, ns := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == ns || strings.HasSuffix(prefix, "."+ns) {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func validatePools(cfgs []AddressPool, p *field.Path) ([]*Pool, field.ErrorList) {
	var errs field.ErrorList
	pools := make([]*Pool, 0, len(cfgs))
	names := map[string]bool{}
	for i := range cfgs {
		pp := p.Index(i)
		pl, perrs := validatePool(&cfgs[i], pp)
		errs = append(errs, perrs...)
		if names[cfgs[i].Name] {
			errs = append(errs, field.Duplicate(pp.Child("name"), cfgs[i].Name))
		}
		names[cfgs[i].Name] = true
		pools = append(pools, pl)
	}
	if len(errs) == 0 {
		errs = append(errs, checkOverlaps(pools, p)...)
	}
	return pools, errs
}

func validatePool(c *AddressPool, p *field.Path) (*Pool, field.ErrorList) {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(c.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
	}
	if len(c.Addresses) == 0 {
		errs = append(errs, field.Required(p.Child("addresses"), "list at least one CIDR (192.0.2.0/28) or range (192.0.2.10-192.0.2.20)"))
	}
	pl := &Pool{Name: c.Name, AutoAssign: c.AutoAssign == nil || *c.AutoAssign}
	for j, a := range c.Addresses {
		e, err := addrpool.ParseEntry(a)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("addresses").Index(j), a, err.Error()))
			continue
		}
		pl.Entries = append(pl.Entries, e)
	}
	errs = append(errs, validateNamespaces(c.Namespaces, p.Child("namespaces"), pl)...)
	var serrs field.ErrorList
	pl.NamespaceSelectors, serrs = selectors(c.NamespaceSelectors, p.Child("namespaceSelectors"))
	errs = append(errs, serrs...)
	pl.ServiceSelectors, serrs = selectors(c.ServiceSelectors, p.Child("serviceSelectors"))
	errs = append(errs, serrs...)
	if c.Priority < 0 {
		errs = append(errs, field.Invalid(p.Child("priority"), c.Priority, "must be 0 (no priority) or positive; lower is tried first"))
	}
	pl.Priority = c.Priority
	return pl, errs
}

func validateNamespaces(nss []string, p *field.Path, pl *Pool) field.ErrorList {
	var errs field.ErrorList
	for j, ns := range nss {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(p.Index(j), ns, msg+" (it must be a namespace name)"))
		}
		if pl.Namespaces == nil {
			pl.Namespaces = map[string]bool{}
		}
		if pl.Namespaces[ns] {
			errs = append(errs, field.Duplicate(p.Index(j), ns))
		}
		pl.Namespaces[ns] = true
	}
	return errs
}

// checkOverlaps reports every pair of overlapping entries, naming both pools
// and entries. Sorted by first address, two entries overlap when the later
// one starts inside the earlier one; pools hold few entries, so the pairwise
// loop is cheap.
func checkOverlaps(pools []*Pool, p *field.Path) field.ErrorList {
	type item struct {
		r          addrpool.Range
		pool       int
		entryIndex int
	}
	var items []item
	for pi, pl := range pools {
		for ei, e := range pl.Entries {
			items = append(items, item{r: e.Extent, pool: pi, entryIndex: ei})
		}
	}
	slices.SortFunc(items, func(a, b item) int { return a.r.First.Compare(b.r.First) })
	var errs field.ErrorList
	for i := 1; i < len(items); i++ {
		for j := 0; j < i; j++ {
			a, b := items[j], items[i]
			if !a.r.Contains(b.r.First) {
				continue
			}
			errs = append(errs, field.Invalid(p.Index(b.pool).Child("addresses").Index(b.entryIndex), b.r.String(),
				fmt.Sprintf("overlaps %s of pool %q (%s); pools and their entries must not overlap",
					a.r, pools[a.pool].Name, p.Index(a.pool).Child("addresses").Index(a.entryIndex))))
		}
	}
	return errs
}

// selectors parses label selectors, naming each one that does not parse.
func selectors(in []metav1.LabelSelector, p *field.Path) ([]labels.Selector, field.ErrorList) {
	var out []labels.Selector
	var errs field.ErrorList
	for i := range in {
		sel, err := metav1.LabelSelectorAsSelector(&in[i])
		if err != nil {
			errs = append(errs, field.Invalid(p.Index(i), in[i].String(), err.Error()))
			continue
		}
		out = append(out, sel)
	}
	return out, errs
}

// LoadBalancersMissing tells the config's check of loadBalancer.defaultBackend
// and classes (config.LoadBalancerOffer) that a backend without pools offers
// no load balancers, and how to give it some.
func (s *Settings) LoadBalancersMissing(section *field.Path) string {
	if s != nil && len(s.AddressPools) > 0 {
		return ""
	}
	return "add an address pool under " + section.Child("addressPools").String()
}
