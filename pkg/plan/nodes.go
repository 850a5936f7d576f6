package plan

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
)

// node plans one Node through the router's own answers, as the
// node-lifecycle controller (InstanceExists, InstanceShutdown) and the
// cloud-node controller (InstanceMetadata) would ask them. A node of a
// platform the router does not serve (Router.ForeignPlatform, KEP-5778) is
// another CCM's: the router answers it exists, refuses to initialise it
// while it is tainted and gives it no backend, so the plan names the
// platform whose CCM it is left to instead.
//
// It also returns the node as the switch leaves it (settled): nil for one
// it deletes, initialised (its providerID, addresses and labels, the
// uninitialized taint gone) for one it claims, else as it is.
func (p *planner) node(ctx context.Context, n *corev1.Node) (NodePlan, *corev1.Node) {
	np, md := p.nodePlan(ctx, n)
	return np, settled(n, np, md)
}

// settled is the node as the switch leaves it, after the node-lifecycle
// and cloud-node controllers acted on the plan's outcome np: gone if
// deleted; if claimed, initialised from the instance's metadata md as
// upstream's cloud-node controller does (a tainted node gets the
// providerID, the addresses and the labels, and loses the taint; an
// initialised one gets its addresses updated).
func settled(n *corev1.Node, np NodePlan, md *cloudprovider.InstanceMetadata) *corev1.Node {
	switch {
	case np.Outcome == NodeDeleted:
		return nil
	case np.Outcome != NodeClaimed || md == nil:
		return n
	}
	out := n.DeepCopy()
	i := slices.IndexFunc(out.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider })
	if i >= 0 {
		out.Spec.Taints = slices.Delete(out.Spec.Taints, i, i+1)
		if out.Spec.ProviderID == "" {
			out.Spec.ProviderID = md.ProviderID
		}
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		for k, v := range md.AdditionalLabels {
			out.Labels[k] = v
		}
	}
	if len(md.NodeAddresses) > 0 {
		out.Status.Addresses = slices.Clone(md.NodeAddresses)
	}
	return out
}

// nodePlan is node's plan, with the instance's metadata when the router
// answered it.
func (p *planner) nodePlan(ctx context.Context, n *corev1.Node) (NodePlan, *cloudprovider.InstanceMetadata) {
	if platform, foreign := p.r.ForeignPlatform(n); foreign {
		return NodePlan{Name: n.Name, ProviderID: n.Spec.ProviderID, Platform: platform, Outcome: NodeOtherCCM}, nil
	}
	np := NodePlan{Name: n.Name, ProviderID: n.Spec.ProviderID, ChosenBy: p.chosenBy(n)}
	exists, err := p.r.InstanceExists(ctx, n)
	if err != nil {
		np.Outcome, np.Error, np.ChosenBy = NodeError, errText(err), ""
		return np, nil
	}
	if !exists {
		// The owner positively reports the instance gone: the lifecycle
		// controller deletes the Node at once if it is not Ready, and
		// leaves a Ready one alone until it is not.
		np.Outcome, np.Backend = NodeDeleted, p.ownerByLabelOrScheme(n)
		if ready(n) {
			np.Outcome = NodeGoneReady
		}
		return np, nil
	}
	np.InstanceFound = true
	md, err := p.r.InstanceMetadata(ctx, n)
	if err != nil {
		np.Outcome, np.Error = NodeError, errText(err)
		return np, nil
	}
	np.Backend = md.AdditionalLabels[string(annotation.NodeBackend)]
	if np.Backend == "" {
		// The router answers metadata of its own for nodes it leaves alone
		// (nodes.unmanaged: ignore).
		np.Outcome, np.ChosenBy = NodeUnmanaged, ""
		return np, md
	}
	if n.Spec.ProviderID == "" {
		np.NewProviderID = md.ProviderID
	}
	np.Outcome = NodeClaimed
	if ready(n) {
		// The lifecycle controller asks about shutdowns only for nodes
		// that are not Ready (and removes the taint from Ready ones).
		return np, md
	}
	if shutdown, err := p.r.InstanceShutdown(ctx, n); err == nil {
		np.Shutdown = shutdown
	}
	return np, md
}

// ready is the node-lifecycle controller's test before it asks the cloud
// about a node (upstream's MonitorNodes): its Ready condition is True. No
// condition counts as Unknown, so not Ready.
func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// chosenBy says which of the router's rules (docs/routing.md, "Which
// backend owns a node") decides the node's backend, in the router's order.
func (p *planner) chosenBy(n *corev1.Node) string {
	if _, ok := n.Labels[string(annotation.NodeBackend)]; ok {
		return "label"
	}
	if n.Spec.ProviderID != "" {
		return "scheme"
	}
	for i := range p.cfg.Nodes.Rules {
		if p.cfg.Nodes.Rules[i].Matches(n.Name, n.Labels) {
			return "rule"
		}
	}
	return "claim"
}

// ownerByLabelOrScheme names the backend that reported a node's instance
// gone: its label's, else the one backend of its scheme (several share it:
// each said gone).
func (p *planner) ownerByLabelOrScheme(n *corev1.Node) string {
	if b := n.Labels[string(annotation.NodeBackend)]; b != "" {
		return b
	}
	scheme, _ := providerid.Scheme(n.Spec.ProviderID)
	var names []string
	for _, b := range p.backends {
		if b.Scheme == scheme {
			names = append(names, b.Name)
		}
	}
	return strings.Join(names, ",")
}
