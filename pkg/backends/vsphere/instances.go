package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// ReasonGuestInfoMissing is the event reason when the VM's guest has
// reported no usable address, usually because VMware Tools is not running
// yet.
const ReasonGuestInfoMissing = "VSphereGuestInfoMissing"

// InstanceExists reports whether the node's VM exists. It answers false
// only when every vCenter was searched, after a fresh inventory, and none
// has the VM; for a node without providerID, true means the node is one of
// this backend's VMs.
func (c *Cloud) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	m, err := c.find(ctx, node)
	if errors.Is(err, errNotFound) {
		c.logger(ctx, node).V(2).Info("No VM matches the node in any vCenter")
		return false, nil
	}
	if err != nil {
		return false, c.wrap(node, err)
	}
	c.logger(ctx, node).V(4).Info("Node's VM found", "vcenter", m.vm.VCenter, "vm", m.vm.Name)
	return true, nil
}

// InstanceShutdown reports whether the node's VM is powered off. A VM that
// no vCenter has is not shut down (InstanceExists reports it gone). A true
// rests on fresh evidence: an inventory that shows the VM powered off is
// confirmed by reading the VM's power state now, so a VM powered on since
// is never reported shut down. While the VM's host is disconnected its
// power state is not known: an error.
func (c *Cloud) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	m, err := c.find(ctx, node)
	off := false
	if err == nil {
		off, err = c.poweredOff(ctx, m.vm)
	}
	if errors.Is(err, errNotFound) {
		return false, nil
	}
	if err != nil {
		return false, c.wrap(node, err)
	}
	return off, nil
}

// poweredOff reports whether vm is powered off, reading its state again
// when the inventory says so.
func (c *Cloud) poweredOff(ctx context.Context, vm *vmInfo) (bool, error) {
	if err := checkConnected(vm.Name, vm.ConnectionState); err != nil {
		return false, err
	}
	if vm.PowerState != types.VirtualMachinePowerStatePoweredOff {
		return false, nil
	}
	v := c.vcenterNamed(vm.VCenter)
	if v == nil {
		return false, fmt.Errorf("VM %s: vCenter %s is not configured", vm.Name, vm.VCenter)
	}
	state, err := v.powerState(ctx, vm)
	if err != nil {
		return false, err
	}
	return state == types.VirtualMachinePowerStatePoweredOff, nil
}

// checkConnected is an error unless vCenter manages the VM (its power state
// is current).
func checkConnected(name string, state types.VirtualMachineConnectionState) error {
	if state == "" || state == types.VirtualMachineConnectionStateConnected {
		return nil
	}
	return fmt.Errorf("VM %s is %s in vCenter: its power state is not known", name, state)
}

// InstanceMetadata returns the node's providerID, addresses, instance type,
// zone and region. A VM whose guest reported no usable address is an error
// (the node stays uninitialised) rather than a node without addresses.
func (c *Cloud) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	m, err := c.find(ctx, node)
	if errors.Is(err, errNotFound) {
		err = fmt.Errorf("%w: %w", cloudprovider.InstanceNotFound, err)
	}
	if err == nil {
		var md *cloudprovider.InstanceMetadata
		if md, err = c.metadata(m); err == nil {
			return md, nil
		}
	}
	return nil, c.wrap(node, err)
}

func (c *Cloud) metadata(m match) (*cloudprovider.InstanceMetadata, error) {
	vm := m.vm
	addrs := nodeAddresses(&c.settings.Addresses, vm)
	if len(addrs) == 0 {
		return nil, guestInfoMissing(vm, c.settings.Addresses.IPFamilies)
	}
	md := &cloudprovider.InstanceMetadata{
		ProviderID:       vm.ProviderID(),
		InstanceType:     instanceType(vm),
		NodeAddresses:    addrs,
		AdditionalLabels: c.recordLabels(vm),
	}
	if c.settings.ZoneCategory == "" && c.settings.RegionCategory == "" {
		return md, nil
	}
	if m.snap.tagErr != nil {
		return nil, fmt.Errorf("reading the zone and region of VM %s: %w", vm.Name, m.snap.tagErr)
	}
	topo := m.snap.topology[vm.Ref]
	if topo.Err != nil {
		return nil, topo.Err
	}
	md.Zone, md.Region = topo.Zone, topo.Region
	return md, nil
}

func guestInfoMissing(vm *vmInfo, families []string) error {
	if len(vm.IPs) == 0 {
		return newUserError(ReasonGuestInfoMissing, "VM %s (%s) has reported no guest addresses (power state %s): VMware Tools is not running or has not reported yet; the node stays uninitialised until it does",
			vm.Name, vm.UUID, vm.PowerState)
	}
	ips := make([]string, 0, len(vm.IPs))
	for _, g := range vm.IPs {
		ips = append(ips, g.IP)
	}
	return newUserError(ReasonGuestInfoMissing, "VM %s (%s) reports addresses %s, none usable as a node address of families %s under the addresses rules; fix addresses.internalSubnets, internalNetworks, excludeSubnets or ipFamilies",
		vm.Name, vm.UUID, strings.Join(ips, ", "), strings.Join(families, ", "))
}

// instanceType describes a VM's size and guest OS, e.g.
// vsphere-vm.cpu-4.mem-8gb.os-ubuntu.
func instanceType(vm *vmInfo) string {
	mem := fmt.Sprintf("%dmb", vm.MemoryMB)
	if vm.MemoryMB%1024 == 0 {
		mem = fmt.Sprintf("%dgb", vm.MemoryMB/1024)
	}
	return fmt.Sprintf("vsphere-vm.cpu-%d.mem-%s.os-%s", vm.NumCPU, mem, guestOS(vm.GuestID))
}

// guestOS shortens a guest ID to its OS name: ubuntu64Guest is ubuntu,
// rhel8_64Guest is rhel, windows2019srv_64Guest is windows.
func guestOS(id string) string {
	id = strings.TrimSuffix(id, "Guest")
	end := strings.IndexFunc(id, func(r rune) bool { return !unicode.IsLetter(r) })
	if end >= 0 {
		id = id[:end]
	}
	if id == "" {
		return "unknown"
	}
	return strings.ToLower(id)
}

// withDeadline bounds a call: two refreshes (a stale and a missed lookup)
// of every vCenter at once, at most.
func (c *Cloud) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 2*c.settings.RequestTimeout.Duration+time.Second)
}

func (c *Cloud) logger(ctx context.Context, node *corev1.Node) klog.Logger {
	return klog.FromContext(ctx).WithValues("node", klog.KObj(node), "providerID", node.Spec.ProviderID)
}

// wrap prefixes err with the node (the router adds the backend and the
// operation).
func (c *Cloud) wrap(node *corev1.Node, err error) error {
	return fmt.Errorf("node %s: %w", node.Name, err)
}
