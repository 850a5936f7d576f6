package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"
)

// Event reasons for Node problems a user can fix. They are stable.
const (
	reasonInvalidProviderID = "InvalidProviderID"
	reasonUnmanagedNode     = "UnmanagedNode"
	ReasonUnknownBackend    = "UnknownBackend"
	ReasonAmbiguousNode     = "AmbiguousNodeOwner"
	ReasonNodeNotClaimed    = "NodeOwnerNotFound"
	reasonBackendLookup     = "BackendLookupFailed"
)

// errUnmanaged marks a node whose providerID scheme no backend owns.
var errUnmanaged = errors.New("no backend owns this providerID scheme")

// resolution is the outcome of finding a node's backend.
type resolution struct {
	// b is the backend owning the node, when one was found.
	b *backend.Member
	// candidates are the backends sharing the node's scheme when more than
	// one does and neither label nor claim settled it.
	candidates []*backend.Member
	// claimed is true when b was found by asking the backends, so b already
	// answered that the instance exists.
	claimed bool
	// byName is true when b serves the node's providerID scheme through a
	// nodes.schemes entry: b is asked about the node as if it had no
	// providerID, and matches it by name.
	byName bool
}

// asked is node as res.b is asked about it: without its providerID when
// the backend serves its scheme through nodes.schemes.
func (res resolution) asked(node *corev1.Node) *corev1.Node {
	if !res.byName {
		return node
	}
	n := node.DeepCopy()
	n.Spec.ProviderID = ""
	return n
}

// resolve finds the backend that owns node. A node of another CCM's
// platform (see platform.go) is an error wrapping errForeign.
func (r *Nodes) resolve(ctx context.Context, node *corev1.Node) (resolution, error) {
	if err := r.foreign(node); err != nil {
		return resolution{}, err
	}
	if node.Spec.ProviderID != "" {
		return r.resolveByProviderID(ctx, node)
	}
	return r.resolveUnowned(ctx, node)
}

// resolveByProviderID finds the backend of a node by its providerID. The
// node's backend label, once written, is its recorded owner and wins
// whatever the number of backends serving the scheme: a label naming a
// backend that is not configured, or that does not serve the scheme, is an
// error and the node is never asked of another backend (which would answer
// "not mine" and get the node deleted).
func (r *Nodes) resolveByProviderID(_ context.Context, node *corev1.Node) (resolution, error) {
	scheme, err := providerid.Scheme(node.Spec.ProviderID)
	if err != nil {
		return resolution{}, backends.NewUserError(reasonInvalidProviderID, fmt.Errorf("node %s: spec.providerID: %w", node.Name, err))
	}
	if name, ok := node.Labels[string(annotation.NodeBackend)]; ok {
		return r.resolveByLabel(node, scheme, name)
	}
	owners := r.ByScheme[scheme]
	switch len(owners) {
	case 0:
		if b := r.aliasBackend(scheme); b != nil {
			return resolution{b: b, byName: true}, nil
		}
		return resolution{}, fmt.Errorf("node %s: providerID %q: %w (schemes served: %s); set nodes.unmanaged: ignore to leave such nodes alone quietly",
			node.Name, node.Spec.ProviderID, errUnmanaged, strings.Join(r.schemes(), ", "))
	case 1:
		return resolution{b: owners[0]}, nil
	}
	return resolution{candidates: owners}, nil
}

// resolveByLabel routes a node with a providerID to the backend its label
// names, which must be configured, have instances and serve the scheme.
func (r *Nodes) resolveByLabel(node *corev1.Node, scheme, name string) (resolution, error) {
	if b, ok := r.ByName[name]; ok && b.Instances != nil && b.Scheme == scheme {
		return resolution{b: b}, nil
	}
	if b := r.aliasBackend(scheme); b != nil && b.Name == name {
		return resolution{b: b, byName: true}, nil
	}
	if b, ok := r.ByName[name]; ok && b.Instances != nil && len(r.ByScheme[scheme]) == 0 {
		// The backend is there but serves another scheme: the node was
		// served through a nodes.schemes entry that is gone.
		return resolution{}, backend.UserErr(ReasonUnknownBackend, "node %s: label %s=%q names backend %s, which serves %s://, not %s:// (no nodes.schemes entry gives %s to it); "+
			"if one did, add it back (nodes.schemes: [{scheme: %s, backend: %s}]; the node is kept, never deleted meanwhile), or fix the label if the node moved",
			node.Name, annotation.NodeBackend, name, name, b.Scheme, scheme, scheme, scheme, name)
	}
	return resolution{}, backend.UserErr(ReasonUnknownBackend, "node %s: label %s=%q names no configured backend serving %s:// (those are %v); "+
		"if the backend was removed from the config, add it back (its nodes are kept, never asked of another backend), "+
		"or fix the label if the node moved",
		node.Name, annotation.NodeBackend, name, scheme, backend.Names(r.ByScheme[scheme]))
}

// resolveUnowned finds the backend of a node with no providerID: the label
// hint, then the config's rules, then asking every instance backend.
func (r *Nodes) resolveUnowned(ctx context.Context, node *corev1.Node) (resolution, error) {
	if name, ok := node.Labels[string(annotation.NodeBackend)]; ok {
		b, found := r.ByName[name]
		if !found || b.Instances == nil {
			return resolution{}, backend.UserErr(ReasonUnknownBackend, "node %s: label %s=%q names no backend with instances (have: %v); fix the kubelet's --node-labels",
				node.Name, annotation.NodeBackend, name, backend.Names(r.InstanceBackends))
		}
		if p := node.Annotations[providerid.PlatformAnnotation]; p != "" && b.Scheme != p && r.aliasBackend(p) != b {
			return resolution{}, backend.UserErr(ReasonUnknownBackend, "node %s: annotation %s=%q says its platform is %s, but label %s=%q names a %s backend; fix the kubelet's --node-labels or the annotation so they agree",
				node.Name, providerid.PlatformAnnotation, p, p, annotation.NodeBackend, name, b.Scheme)
		}
		return resolution{b: b}, nil
	}
	platform := node.Annotations[providerid.PlatformAnnotation]
	for i := range r.Cfg.Nodes.Rules {
		rule := &r.Cfg.Nodes.Rules[i]
		if rule.Matches(node.Name, node.Labels) {
			if b, ok := r.ByName[rule.Backend]; ok && b.Instances != nil {
				if platform != "" && b.Scheme != platform && r.aliasBackend(platform) != b {
					// The KEP-5778 annotation names the node's platform
					// exactly; a rule is a broad default.
					continue
				}
				return resolution{b: b}, nil
			}
		}
	}
	v, err, _ := r.claims.Do(node.Name, func() (any, error) {
		return r.claim(ctx, node, r.claimants(node))
	})
	if err != nil {
		return resolution{}, err
	}
	return resolution{b: v.(*backend.Member), claimed: true}, nil
}

// claim asks every candidate, concurrently, whether node is one of its
// instances. Exactly one must say yes. A backend that fails to answer makes
// the claim fail: another backend's yes cannot be trusted while one that
// might also say yes is silent.
func (r *Nodes) claim(ctx context.Context, node *corev1.Node, candidates []*backend.Member) (*backend.Member, error) {
	var claimers []*backend.Member
	err := backend.Ask(ctx, candidates, func(ctx context.Context, b *backend.Member) (answer, error) {
		return answerFrom(ctx, b, node)
	}, func(b *backend.Member, a answer) {
		if a.exists {
			claimers = append(claimers, b)
		}
	})
	return pickClaimer(node, claimers, err)
}

// ReasonOutsideRegion is the reason a backend gives a providerID (or node)
// naming a region or zone it does not serve: such a node is not that
// backend's, which is neither a yes nor a failure to answer.
const ReasonOutsideRegion = "NodeOutsideRegion"

// answer is one candidate backend's reply about a node: it holds the
// instance, or the node lies outside every region the backend serves.
type answer struct {
	exists, outside bool
}

// answerFrom asks b whether node's instance exists. A NodeOutsideRegion error is
// an answer (not b's node), so one region's backend cannot stop another's
// from claiming or positively reporting a node of its own region.
func answerFrom(ctx context.Context, b *backend.Member, node *corev1.Node) (answer, error) {
	exists, err := b.InstanceExists(ctx, node)
	if ue, ok := backends.AsUserError(err); ok && ue.Reason == ReasonOutsideRegion {
		return answer{outside: true}, nil
	}
	return answer{exists: exists}, err
}

func pickClaimer(node *corev1.Node, claimers []*backend.Member, failed error) (*backend.Member, error) {
	hint := fmt.Sprintf("label the node %s=<backend> (kubelet --node-labels) or add a nodes.rules entry", annotation.NodeBackend)
	switch {
	case len(claimers) > 1:
		return nil, backend.UserErr(ReasonAmbiguousNode, "node %s has no providerID and backends %v all claim it; %s", node.Name, backend.Names(claimers), hint)
	case failed != nil:
		return nil, backends.NewUserError(reasonBackendLookup, fmt.Errorf("node %s has no providerID and not every backend could be asked about it; %s: %w", node.Name, hint, failed))
	case len(claimers) == 0:
		return nil, backend.UserErr(ReasonNodeNotClaimed, "node %s has no providerID and no backend has an instance matching it; %s, or check the node's name and addresses", node.Name, hint)
	}
	return claimers[0], nil
}

func (r *Nodes) schemes() []string {
	out := make([]string, 0, len(r.ByScheme))
	for s := range r.ByScheme {
		out = append(out, s+"://")
	}
	return sortStrings(out)
}

// recordNodeError puts a Warning event on node for errors a user can fix.
func (r *Nodes) recordNodeError(ctx context.Context, node *corev1.Node, err error) {
	if ue, ok := backends.AsUserError(err); ok {
		r.Warn(ctx, svcstate.NodeRef(node), ue.Reason, err.Error())
		return
	}
	if errors.Is(err, errUnmanaged) {
		r.Warn(ctx, svcstate.NodeRef(node), reasonUnmanagedNode, err.Error())
	}
}

func sortStrings(s []string) []string {
	sort.Strings(s)
	return s
}
