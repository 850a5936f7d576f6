package dispatch

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// InstanceExists reports whether the node's instance exists in its backend.
// It answers (false, nil) only when the owning backend positively reports the
// instance gone; every doubt is an error, which upstream only logs.
func (r *Nodes) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	res, err := r.resolve(ctx, node)
	if err != nil {
		return r.unresolved(ctx, node, err, true)
	}
	if res.candidates != nil {
		return r.existsAmong(ctx, node, res.candidates)
	}
	if res.claimed {
		return true, nil
	}
	exists, err := res.b.InstanceExists(ctx, res.asked(node))
	if err != nil {
		r.recordNodeError(ctx, node, err)
		return false, err
	}
	if !exists && (node.Spec.ProviderID == "" || res.byName) {
		err := notClaimed(node, res)
		r.recordNodeError(ctx, node, err)
		return false, err
	}
	r.States.Problems.NodeResolved(node)
	return exists, nil
}

// notClaimed is the error for a node its chosen backend has no instance
// of. It is never "gone": the node had no providerID, or one of a scheme
// the backend serves through nodes.schemes, matched by name.
func notClaimed(node *corev1.Node, res resolution) error {
	if res.byName {
		return backend.UserErr(ReasonNodeNotClaimed, "node %s: backend %s serves providerID %q through nodes.schemes but has no machine named %s; add it to the backend, or remove the scheme from nodes.schemes",
			node.Name, res.b.Name, node.Spec.ProviderID, node.Name)
	}
	return backend.UserErr(ReasonNodeNotClaimed, "node %s has no providerID and backend %s, chosen by its %s label or a nodes.rules entry, has no instance matching it; fix the label or rule",
		node.Name, res.b.Name, annotation.NodeBackend)
}

// InstanceShutdown reports whether the node's instance is shut down.
// Unmanaged nodes and other CCMs' nodes are never reported shut down.
func (r *Nodes) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	res, err := r.ownership(ctx, node)
	if err != nil {
		return r.unresolved(ctx, node, err, false)
	}
	shutdown, err := res.b.InstanceShutdown(ctx, res.asked(node))
	if err != nil {
		r.recordNodeError(ctx, node, err)
	}
	return shutdown, err
}

// InstanceMetadata returns the node's metadata from its backend, labelled
// with the backend's name, and writes the node's platform label (see
// labelPlatform). It never returns (nil, nil).
func (r *Nodes) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	res, err := r.ownership(ctx, node)
	if errors.Is(err, errForeign) || (errors.Is(err, errUnmanaged) && r.Cfg.Nodes.Unmanaged == config.UnmanagedIgnore) {
		return unmanagedMetadata(node, err)
	}
	if err != nil {
		r.recordNodeError(ctx, node, err)
		return nil, err
	}
	b := res.b
	md, err := b.InstanceMetadata(ctx, res.asked(node))
	if err == nil {
		err = b.CheckProviderID(node, md.ProviderID)
	}
	if err != nil {
		r.recordNodeError(ctx, node, err)
		return nil, err
	}
	r.States.Problems.NodeResolved(node)
	out := b.WithBackendLabel(md)
	if res.byName {
		out.ProviderID = node.Spec.ProviderID
	}
	r.labelPlatform(ctx, node, b)
	return out, nil
}

// owner resolves node to the one backend that owns it, asking the
// candidates when several backends share its scheme.
func (r *Nodes) owner(ctx context.Context, node *corev1.Node) (*backend.Member, error) {
	res, err := r.ownership(ctx, node)
	return res.b, err
}

// ownership is owner with the whole resolution: how the backend is to be
// asked about the node.
func (r *Nodes) ownership(ctx context.Context, node *corev1.Node) (resolution, error) {
	res, err := r.resolve(ctx, node)
	if err != nil || res.candidates == nil {
		return res, err
	}
	b, err := r.claim(ctx, node, res.candidates)
	return resolution{b: b}, err
}

// unresolved answers InstanceExists (exists=true) or InstanceShutdown for a
// node whose backend could not be found: other CCMs' nodes, and unmanaged
// nodes under "unmanaged: ignore", exist and are running, so the
// node-lifecycle controller neither deletes nor taints them; anything else
// is an error, never a false that would delete the node.
func (r *Nodes) unresolved(ctx context.Context, node *corev1.Node, err error, exists bool) (bool, error) {
	if errors.Is(err, errForeign) {
		klog.FromContext(ctx).V(5).Info("Leaving another CCM's node alone", "node", klog.KObj(node), "err", err.Error())
		return exists, nil
	}
	if errors.Is(err, errUnmanaged) && r.Cfg.Nodes.Unmanaged == config.UnmanagedIgnore {
		return exists, nil
	}
	r.recordNodeError(ctx, node, err)
	return false, err
}

// existsAmong asks every backend sharing the node's scheme: the instance
// exists if any has it, is gone only if all answer that they do not.
//
// A backend answering that the node is outside its regions has no say: the
// node is gone only when a backend serving its region reports it so, and a
// node outside every candidate's region is an error (its backend may have
// been removed from the config), never gone.
func (r *Nodes) existsAmong(ctx context.Context, node *corev1.Node, candidates []*backend.Member) (bool, error) {
	found, served := false, false
	err := backend.Ask(ctx, candidates, func(ctx context.Context, b *backend.Member) (answer, error) {
		return answerFrom(ctx, b, node)
	}, func(_ *backend.Member, a answer) {
		found = found || a.exists
		served = served || !a.outside
	})
	if found {
		return true, nil
	}
	if err == nil && !served {
		err = backend.UserErr(ReasonOutsideRegion, "node %s: providerID %q is outside the regions of every backend serving its scheme (%v); if its cloud was removed from the config, add it back or label the node %s=<backend>",
			node.Name, node.Spec.ProviderID, backend.Names(candidates), annotation.NodeBackend)
		r.recordNodeError(ctx, node, err)
	}
	return false, err
}

// unmanagedMetadata is the metadata of another CCM's node, or of an
// unmanaged node under "unmanaged: ignore": its own providerID and nothing
// else (no addresses, no labels), so upstream changes nothing on an
// initialised node. A node still carrying the uninitialized taint is an
// error, left for whichever controller owns its platform.
func unmanagedMetadata(node *corev1.Node, err error) (*cloudprovider.InstanceMetadata, error) {
	for _, t := range node.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return nil, fmt.Errorf("%w: leaving it uninitialised for the controller that owns its scheme", err)
		}
	}
	return &cloudprovider.InstanceMetadata{ProviderID: node.Spec.ProviderID}, nil
}
