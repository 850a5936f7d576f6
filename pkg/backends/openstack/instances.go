package openstack

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack/osid"
)

// Event reasons of the node errors a user can fix.
const (
	// reasonInvalidProviderID is the reason of an openstack:// providerID
	// that does not parse; every backend gives its scheme's this reason.
	reasonInvalidProviderID = "InvalidProviderID"
	// reasonOutsideRegion is the reason of a node whose providerID (or,
	// without a region in it, whose region label) names a region this
	// backend does not serve.
	reasonOutsideRegion = "NodeOutsideRegion"
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
// openstack:///<uuid>) of an OpenStack providerID (osid.ParseProviderID).
// One that does not parse is a backends.UserError with reason
// InvalidProviderID.
func ParseProviderID(providerID string) (id, region string, err error) {
	id, region, err = osid.ParseProviderID(providerID)
	if err != nil {
		return "", "", invalidProviderID(err)
	}
	return id, region, nil
}

func invalidProviderID(err error) error {
	return backends.NewUserError(reasonInvalidProviderID, fmt.Errorf("spec.providerID: %w", err))
}

// checkRegion refuses a node of a region this backend does not serve: the
// region of its providerID, or for openstack:///<uuid> the region label the
// cloud-node controller wrote from InstanceMetadata at initialisation. A
// server UUID is only unique within one cloud: asking this region's Nova
// about another region's server would answer 404 and delete the Node.
func (i *Instances) checkRegion(node *corev1.Node, pidRegion string) error {
	region, from := pidRegion, "its providerID"
	if region == "" {
		region, from = regionLabel(node)
	}
	if region == "" || region == i.region {
		return nil
	}
	return backends.NewUserError(reasonOutsideRegion, fmt.Errorf("%s names region %q, this backend serves %q: configure an OpenStack backend for region %q, or label the node %s=<its backend>",
		from, region, i.region, region, annotation.NodeBackend))
}

// regionLabel returns the node's region label and its description, or "".
func regionLabel(node *corev1.Node) (region, from string) {
	for _, l := range []string{corev1.LabelTopologyRegion, corev1.LabelFailureDomainBetaRegion} {
		if v := node.Labels[l]; v != "" {
			return v, "its label " + l
		}
	}
	return "", ""
}

// providerID writes the providerID of a server the way the upstream
// OpenStack provider does.
func (i *Instances) providerID(id string) string {
	if i.regional {
		return osid.ProviderID(i.region, id)
	}
	return osid.ProviderID("", id)
}

// lookup finds the node's server: by providerID, or by exact name when the
// node has none. A gone server is an error wrapping errServerNotFound.
func (i *Instances) lookup(ctx context.Context, node *corev1.Node) (*server, error) {
	if node.Spec.ProviderID == "" {
		srv, err := i.cache.byName(ctx, node.Name)
		if err != nil {
			return nil, err
		}
		return checkStatus(srv)
	}
	id, region, err := ParseProviderID(node.Spec.ProviderID)
	if err != nil {
		return nil, err
	}
	if err := i.checkRegion(node, region); err != nil {
		return nil, err
	}
	srv, err := i.cache.byID(ctx, id)
	if err != nil {
		return nil, err
	}
	return checkStatus(srv)
}

// checkStatus turns the statuses that say nothing of a live server into
// errors: DELETED is gone; UNKNOWN (Nova cannot reach the server's compute
// host or cell) is unreadable, an error for every question, never gone.
func checkStatus(srv *server) (*server, error) {
	switch srv.Status {
	case statusDeleted:
		return nil, fmt.Errorf("server %s is DELETED: %w", srv.ID, errServerNotFound)
	case statusUnknown:
		return nil, fmt.Errorf("server %s is UNKNOWN in Nova (its compute host or cell does not answer): its state cannot be told", srv.ID)
	}
	return srv, nil
}

func (i *Instances) wrap(op string, node *corev1.Node, err error) error {
	return fmt.Errorf("%s for node %s: %w", op, node.Name, err)
}

// InstanceExists is false only when Nova answers 404 for the node's server
// (or, for a node with no providerID, when no server has its name).
func (i *Instances) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	_, err := i.lookup(ctx, node)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errServerNotFound):
		klog.FromContext(ctx).V(2).Info("Server is gone", "node", klog.KObj(node), "providerID", node.Spec.ProviderID)
		return false, nil
	}
	return false, i.wrap("checking existence", node, err)
}

// InstanceShutdown is true when the server is SHUTOFF. A SHUTOFF from the
// cache is confirmed by a direct GET: a true taints the node, so it must
// not come from a listing older than the server's last power change.
func (i *Instances) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	srv, err := i.lookup(ctx, node)
	if err == nil && srv.Status == statusShutoff {
		srv, err = i.cache.fresh(ctx, srv.ID)
	}
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
