package openstack

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// Instances answers for Nova servers. Lookups come from a cache filled by
// bulk, paginated listing.
type Instances struct {
	name     string
	region   string
	regional bool
	cache    *serverCache
}

var _ cloudprovider.InstancesV2 = (*Instances)(nil)

// ParseProviderID returns the server UUID and the region (empty for
// openstack:///<uuid>) of an OpenStack providerID.
func ParseProviderID(providerID string) (id, region string, err error) {
	rest, ok := strings.CutPrefix(providerID, Scheme+"://")
	if !ok {
		return "", "", fmt.Errorf("providerID %q is not an OpenStack one: want %s:///<server-uuid> or %s://<region>/<server-uuid>", providerID, Scheme, Scheme)
	}
	region, id, ok = strings.Cut(rest, "/")
	if !ok || id == "" || strings.Contains(id, "/") || !uuidRE.MatchString(id) {
		return "", "", fmt.Errorf("providerID %q is malformed: want %s:///<server-uuid> or %s://<region>/<server-uuid>", providerID, Scheme, Scheme)
	}
	return id, region, nil
}

// providerID writes the providerID of a server the way the upstream
// OpenStack provider does.
func (i *Instances) providerID(id string) string {
	if i.regional {
		return fmt.Sprintf("%s://%s/%s", Scheme, i.region, id)
	}
	return fmt.Sprintf("%s:///%s", Scheme, id)
}

// lookup finds the node's server: by providerID, or by exact name when the
// node has none. A gone server is an error wrapping errServerNotFound.
func (i *Instances) lookup(ctx context.Context, node *corev1.Node) (*server, error) {
	if node.Spec.ProviderID == "" {
		return i.cache.byName(ctx, node.Name)
	}
	id, region, err := ParseProviderID(node.Spec.ProviderID)
	if err != nil {
		return nil, err
	}
	if region != "" && region != i.region {
		return nil, fmt.Errorf("node %s is in region %q, this backend serves %q", node.Name, region, i.region)
	}
	srv, err := i.cache.byID(ctx, id)
	if err == nil && srv.Status == statusDeleted {
		return nil, fmt.Errorf("server %s is DELETED: %w", id, errServerNotFound)
	}
	return srv, err
}

func (i *Instances) wrap(op string, node *corev1.Node, err error) error {
	return fmt.Errorf("openstack backend %s: %s for node %s: %w", i.name, op, node.Name, err)
}

// InstanceExists is false only when Nova answers 404 for the node's server
// (or, for a node with no providerID, when no server has its name).
func (i *Instances) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	_, err := i.lookup(ctx, node)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errServerNotFound):
		klog.FromContext(ctx).WithValues("backend", i.name).V(2).Info("Server is gone", "node", node.Name, "providerID", node.Spec.ProviderID)
		return false, nil
	}
	return false, i.wrap("checking existence", node, err)
}

// InstanceShutdown is true when the server is SHUTOFF.
func (i *Instances) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	srv, err := i.lookup(ctx, node)
	switch {
	case err == nil:
		return srv.Status == statusShutoff, nil
	case errors.Is(err, errServerNotFound):
		return false, nil
	}
	return false, i.wrap("checking shutdown", node, err)
}

// InstanceMetadata returns the server's providerID, flavor, addresses, zone
// and region. A gone server is an error wrapping
// cloudprovider.InstanceNotFound.
func (i *Instances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	srv, err := i.lookup(ctx, node)
	if errors.Is(err, errServerNotFound) {
		return nil, i.wrap("getting metadata", node, fmt.Errorf("%w: %w", cloudprovider.InstanceNotFound, err))
	}
	if err != nil {
		return nil, i.wrap("getting metadata", node, err)
	}
	pid := node.Spec.ProviderID
	if pid == "" {
		pid = i.providerID(srv.ID)
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:    pid,
		InstanceType:  srv.Flavor,
		NodeAddresses: srv.Addresses,
		Zone:          srv.Zone,
		Region:        i.region,
	}, nil
}
