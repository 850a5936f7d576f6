package baremetal

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

var _ cloudprovider.InstancesV2 = (*Instances)(nil)

// Instances answers for the machines of the inventory. The inventory is part
// of the configuration, so every answer is certain: no call can fail for
// want of a cloud.
type Instances struct {
	backend   string
	inventory map[string]*InventoryEntry
}

// ReasonInvalidProviderID is the event reason of a baremetal providerID
// that does not parse. It is stable, and the same in every backend.
const ReasonInvalidProviderID = "InvalidProviderID"

// ProviderID returns the providerID of the inventory entry name.
func ProviderID(name string) string { return Scheme + "://" + name }

// parseProviderID returns the inventory name in a baremetal providerID.
func parseProviderID(providerID string) (string, error) {
	name, ok := strings.CutPrefix(providerID, Scheme+"://")
	if !ok {
		return "", fmt.Errorf("providerID %q is not a %s providerID (%s://<inventory-name>)", providerID, Scheme, Scheme)
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", backends.NewUserError(ReasonInvalidProviderID, fmt.Errorf("providerID %q is malformed: want %s://<inventory-name>, and %q %s; fix spec.providerID (kubelet --provider-id) or delete the Node and let it register again", providerID, Scheme, name, strings.Join(msgs, "; ")))
	}
	return name, nil
}

// lookup returns the node's inventory entry, or nil when the inventory does
// not list it. A providerID that is not a well-formed baremetal one is an
// error, never "absent".
func (i *Instances) lookup(node *corev1.Node) (*InventoryEntry, error) {
	if node.Spec.ProviderID == "" {
		return i.inventory[node.Name], nil
	}
	name, err := parseProviderID(node.Spec.ProviderID)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	return i.inventory[name], nil
}

// InstanceExists reports whether the inventory lists the node. For a node
// without a providerID it answers whether the node's name is in the
// inventory, which claims the node for this backend.
func (i *Instances) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	e, err := i.lookup(node)
	if err != nil {
		return false, err
	}
	if e == nil {
		klog.FromContext(ctx).V(4).Info("Node is not in the inventory", "node", klog.KObj(node), "providerID", node.Spec.ProviderID)
	}
	return e != nil, nil
}

// InstanceShutdown is always false for a well-formed providerID: the
// inventory knows no power state, so a powered-off machine shows up as a
// NotReady Node and is never shutdown-tainted by this backend.
func (i *Instances) InstanceShutdown(_ context.Context, node *corev1.Node) (bool, error) {
	_, err := i.lookup(node)
	return false, err
}

// InstanceMetadata returns the node's inventory entry as metadata. A node
// the inventory does not list is an error wrapping
// cloudprovider.InstanceNotFound; the metadata is never nil without an error.
func (i *Instances) InstanceMetadata(_ context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	e, err := i.lookup(node)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, fmt.Errorf("node %s (providerID %q) is not in the inventory; add it under baremetal.inventory: %w",
			node.Name, node.Spec.ProviderID, cloudprovider.InstanceNotFound)
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:       ProviderID(e.Name),
		InstanceType:     e.InstanceType,
		NodeAddresses:    slices.Clone(e.Addresses),
		Zone:             e.Zone,
		Region:           e.Region,
		AdditionalLabels: maps.Clone(e.Labels),
	}, nil
}
