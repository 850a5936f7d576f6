package vsphere

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// vmProperties are the VM properties one inventory retrieval reads.
var vmProperties = []string{
	"name",
	"config.uuid",
	"config.template",
	"config.guestId",
	"config.hardware.numCPU",
	"config.hardware.memoryMB",
	"runtime.powerState",
	"runtime.connectionState",
	"runtime.host",
	"guest.hostName",
	"guest.ipAddress",
	"guest.net",
}

// hostProperties are the host properties one inventory retrieval reads.
var hostProperties = []string{"name", "parent"}

// guestIP is one address a VM's guest reports, with the VM network it is on.
type guestIP struct {
	IP      string
	Network string
}

// vmInfo is what the backend knows about one VM, from one retrieval.
type vmInfo struct {
	// VCenter is the host of the vCenter holding the VM.
	VCenter string
	// Datacenter is the datacenter's name as configured.
	Datacenter string
	// Ref is the VM's managed object reference.
	Ref types.ManagedObjectReference
	// Name is the VM's inventory name.
	Name string
	// UUID is the BIOS UUID, lower case.
	UUID       string
	PowerState types.VirtualMachinePowerState
	// ConnectionState is connected when vCenter can manage the VM; while
	// its host is disconnected its power state is not current.
	ConnectionState types.VirtualMachineConnectionState
	NumCPU          int32
	MemoryMB        int32
	GuestID         string
	// HostName is the guest's DNS name as VMware Tools reports it.
	HostName string
	// IPs are the guest's addresses, in the order the guest reports them.
	IPs []guestIP
	// Host and Cluster are the VM's host and its compute resource (a
	// cluster, or the standalone host's compute resource).
	Host, Cluster *types.ManagedObjectReference
	// DatacenterRef is the VM's datacenter.
	DatacenterRef types.ManagedObjectReference
}

// ProviderID is the VM's providerID, exactly as the upstream vSphere
// provider writes it.
func (vm *vmInfo) ProviderID() string { return ProviderIDPrefix + vm.UUID }

// dcRef is a configured datacenter resolved to its reference.
type dcRef struct {
	Name string
	Ref  types.ManagedObjectReference
}

// unreadableVM is a VM whose configuration could not be read: vCenter
// leaves config unset when it cannot reach the VM's files (its datastore is
// inaccessible), and a VM being created or destroyed while read can miss
// properties. Its BIOS UUID is unknown to the retrieval; UUID is the one an
// earlier retrieval saw for the same VM (same reference), if any.
type unreadableVM struct {
	Ref  types.ManagedObjectReference
	Name string
	UUID string
}

// String names the VM in messages: its name and reference, and its UUID
// when known.
func (u unreadableVM) String() string {
	s := u.Ref.Value
	if u.Name != "" {
		s = u.Name + " (" + u.Ref.Value + ")"
	}
	if u.UUID != "" {
		s += " with BIOS UUID " + u.UUID
	}
	return s
}

// inventory is the VMs and hosts of a vCenter's configured datacenters.
type inventory struct {
	vms   []*vmInfo
	hosts map[types.ManagedObjectReference]*types.ManagedObjectReference
	// unreadable lists VMs whose configuration could not be read.
	unreadable []unreadableVM
}

// recall gives each unreadable VM the UUID known lists for its reference
// (what earlier retrievals saw), and returns what the next retrieval may
// recall: the UUIDs of every VM still in the inventory.
func (inv *inventory) recall(known map[types.ManagedObjectReference]string) map[types.ManagedObjectReference]string {
	next := make(map[types.ManagedObjectReference]string, len(inv.vms)+len(inv.unreadable))
	for _, vm := range inv.vms {
		next[vm.Ref] = vm.UUID
	}
	for i := range inv.unreadable {
		u := &inv.unreadable[i]
		if uuid, ok := known[u.Ref]; ok {
			u.UUID = uuid
			next[u.Ref] = uuid
		}
	}
	return next
}

// retrieveInventory reads every VM and host below the datacenters: per
// datacenter one container view and one property-collector retrieval
// (continued in pages of the server's size), whatever the number of VMs.
func retrieveInventory(ctx context.Context, c *vim25.Client, vcenter string, dcs []dcRef) (*inventory, error) {
	inv := &inventory{hosts: map[types.ManagedObjectReference]*types.ManagedObjectReference{}}
	for _, dc := range dcs {
		contents, err := retrieveDatacenter(ctx, c, dc)
		if err != nil {
			return nil, err
		}
		inv.add(vcenter, dc, contents)
	}
	for _, vm := range inv.vms {
		if vm.Host != nil {
			vm.Cluster = inv.hosts[*vm.Host]
		}
	}
	return inv, nil
}

func retrieveDatacenter(ctx context.Context, c *vim25.Client, dc dcRef) ([]types.ObjectContent, error) {
	v, err := view.NewManager(c).CreateContainerView(ctx, dc.Ref, []string{"VirtualMachine", "HostSystem"}, true)
	if err != nil {
		return nil, fmt.Errorf("creating a container view of datacenter %s: %w", dc.Name, err)
	}
	defer func() {
		// A view outlives nothing but the session; failing to destroy it
		// only costs the server a little memory until the session ends.
		_ = v.Destroy(context.WithoutCancel(ctx))
	}()
	req := types.RetrieveProperties{SpecSet: []types.PropertyFilterSpec{{
		ObjectSet: []types.ObjectSpec{{
			Obj:  v.Reference(),
			Skip: types.NewBool(true),
			SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{
				Type: "ContainerView",
				Path: "view",
			}},
		}},
		PropSet: []types.PropertySpec{
			{Type: "VirtualMachine", PathSet: vmProperties},
			{Type: "HostSystem", PathSet: hostProperties},
		},
	}}}
	res, err := property.DefaultCollector(c).RetrieveProperties(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("retrieving the VMs of datacenter %s: %w", dc.Name, err)
	}
	return res.Returnval, nil
}

func (inv *inventory) add(vcenter string, dc dcRef, contents []types.ObjectContent) {
	for _, oc := range contents {
		obj, err := mo.ObjectContentToType(oc)
		if err != nil {
			// It may be any node's VM, so no lookup may conclude from
			// this inventory that a VM is gone.
			if oc.Obj.Type == "VirtualMachine" {
				inv.unreadable = append(inv.unreadable, unreadableVM{Ref: oc.Obj})
			}
			continue
		}
		switch o := obj.(type) {
		case mo.VirtualMachine:
			inv.addVM(vcenter, dc, &o)
		case mo.HostSystem:
			inv.hosts[o.Reference()] = o.Parent
		}
	}
}

// addVM adds a retrieved VM. Templates are not instances. A VM without a
// configuration (or a BIOS UUID in it) is unreadable: it may be any node's
// VM, whose state cannot be told until vCenter can read it again.
func (inv *inventory) addVM(vcenter string, dc dcRef, o *mo.VirtualMachine) {
	switch {
	case o.Config != nil && o.Config.Template:
	case o.Config == nil || o.Config.Uuid == "":
		inv.unreadable = append(inv.unreadable, unreadableVM{Ref: o.Reference(), Name: o.Name})
	default:
		inv.vms = append(inv.vms, newVMInfo(vcenter, dc, o))
	}
}

// newVMInfo converts a retrieved VM that has a configuration.
func newVMInfo(vcenter string, dc dcRef, o *mo.VirtualMachine) *vmInfo {
	vm := &vmInfo{
		VCenter:         vcenter,
		Datacenter:      dc.Name,
		DatacenterRef:   dc.Ref,
		Ref:             o.Reference(),
		Name:            o.Name,
		UUID:            strings.ToLower(o.Config.Uuid),
		PowerState:      o.Runtime.PowerState,
		ConnectionState: o.Runtime.ConnectionState,
		NumCPU:          o.Config.Hardware.NumCPU,
		MemoryMB:        o.Config.Hardware.MemoryMB,
		GuestID:         o.Config.GuestId,
		Host:            o.Runtime.Host,
	}
	if o.Guest != nil {
		vm.HostName = o.Guest.HostName
		vm.IPs = guestIPs(o.Guest)
	}
	return vm
}

// guestIPs lists a guest's addresses: those on its NICs, then its primary
// address when no NIC reported it.
func guestIPs(g *types.GuestInfo) []guestIP {
	var out []guestIP
	seen := map[string]bool{}
	for _, nic := range g.Net {
		for _, ip := range nicIPs(nic) {
			if !seen[ip] {
				seen[ip] = true
				out = append(out, guestIP{IP: ip, Network: nic.Network})
			}
		}
	}
	if g.IpAddress != "" && !seen[g.IpAddress] {
		out = append(out, guestIP{IP: g.IpAddress})
	}
	return out
}

func nicIPs(nic types.GuestNicInfo) []string {
	if nic.IpConfig != nil && len(nic.IpConfig.IpAddress) > 0 {
		out := make([]string, 0, len(nic.IpConfig.IpAddress))
		for _, a := range nic.IpConfig.IpAddress {
			out = append(out, a.IpAddress)
		}
		return out
	}
	return nic.IpAddress
}

// snapshot is one vCenter's inventory at one moment, indexed for lookups.
type snapshot struct {
	// started is when the retrieval began: the snapshot knows every VM
	// that existed then.
	started time.Time
	vms     []*vmInfo
	byUUID  map[string][]*vmInfo
	// topology maps a VM to its zone and region.
	topology map[types.ManagedObjectReference]topology
	// tagErr is why zones and regions could not be read, if they could not.
	tagErr error
	// unreadable lists VMs whose configuration could not be read: while
	// one may be a node's VM, that VM is not known to be gone.
	unreadable []unreadableVM
}

func newSnapshot(started time.Time, inv *inventory) *snapshot {
	s := &snapshot{started: started, vms: inv.vms, byUUID: make(map[string][]*vmInfo, len(inv.vms)), topology: map[types.ManagedObjectReference]topology{}, unreadable: inv.unreadable}
	for _, vm := range inv.vms {
		s.byUUID[vm.UUID] = append(s.byUUID[vm.UUID], vm)
	}
	return s
}
