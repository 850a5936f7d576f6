package vsphere

import "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/vsphere/vsconfig"

// The vsphere section of the cloud-config file is read by package vsconfig
// (vsconfig.ParseSection, registered in init); these are its names here.

const (
	// DefaultRefreshInterval is how old the inventory cache may grow before a
	// lookup refreshes it, and how often it is refreshed in the background.
	DefaultRefreshInterval = vsconfig.DefaultRefreshInterval
	// DefaultRequestTimeout bounds one inventory refresh of one vCenter.
	DefaultRequestTimeout = vsconfig.DefaultRequestTimeout
)

// IP families accepted in addresses.ipFamilies.
const (
	// FamilyIPv4 selects IPv4 node addresses.
	FamilyIPv4 = vsconfig.FamilyIPv4
	// FamilyIPv6 selects IPv6 node addresses.
	FamilyIPv6 = vsconfig.FamilyIPv6
)

// Settings is the vsphere section of a backend in the cloud-config file
// (vsconfig.Settings).
type Settings = vsconfig.Settings

// VCenter is one vCenter server and the datacenters searched in it
// (vsconfig.VCenter).
type VCenter = vsconfig.VCenter

// AddressRules chooses node addresses among a VM's guest addresses
// (vsconfig.AddressRules, which says how).
type AddressRules = vsconfig.AddressRules
