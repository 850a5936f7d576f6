package lbcontroller

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// nodeIncluded is upstream's stable node set (router.StableNode): a node
// is a load-balancer target unless it is being deleted, excluded by label
// or tainted for deletion by the cluster autoscaler. Readiness does not
// matter (the load balancer's health checks decide), so the set changes
// rarely.
var nodeIncluded = router.StableNode

// nodeChangeMatters reports whether a node update can change a load
// balancer's targets: its inclusion or its providerID (which chooses the
// backend that can target it). Address changes are the router's (see
// pkg/router/nodesync.go).
func nodeChangeMatters(old, cur *corev1.Node) bool {
	return nodeIncluded(old) != nodeIncluded(cur) || old.Spec.ProviderID != cur.Spec.ProviderID
}

// nodeSet is a set of targets: node name to providerID.
type nodeSet map[string]string

func setOf(nodes []*corev1.Node) nodeSet {
	s := make(nodeSet, len(nodes))
	for _, n := range nodes {
		s[n.Name] = n.Spec.ProviderID
	}
	return s
}

func (s nodeSet) equal(o nodeSet) bool { return maps.Equal(s, o) }

// targets lists the nodes the load balancers target.
func (c *Controller) targets() ([]*corev1.Node, error) {
	all, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Node, 0, len(all))
	for _, n := range all {
		if nodeIncluded(n) {
			out = append(out, n)
		}
	}
	return out, nil
}
