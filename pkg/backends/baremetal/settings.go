package baremetal

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/bmconfig"
)

// The baremetal section of the cloud-config is package bmconfig's, so that
// pkg/config's tests and fuzz target parse it without this package's
// dependencies (client-go, cloud-provider). These names keep the backend's
// API.
type (
	// Settings is the baremetal section of a backend in the cloud-config
	// file: bmconfig.Settings.
	Settings = bmconfig.Settings
	// InventoryEntry is one machine: bmconfig.InventoryEntry.
	InventoryEntry = bmconfig.InventoryEntry
	// AddressPool is a named set of load-balancer addresses:
	// bmconfig.AddressPool.
	AddressPool = bmconfig.AddressPool
)

// AnnounceKubeVIP is the announce value under which the backend writes its
// addresses where kube-vip reads them.
const AnnounceKubeVIP = bmconfig.AnnounceKubeVIP

// ParseSection is the config.SectionParser of the baremetal type:
// bmconfig.ParseSection, which the backend's registration names.
func ParseSection(raw []byte, path *field.Path, dir string) (any, field.ErrorList) {
	return bmconfig.ParseSection(raw, path, dir)
}
