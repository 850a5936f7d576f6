package lbcontroller

import (
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// toBeDeletedTaint is the cluster autoscaler's taint; upstream leaves such
// nodes out of load balancers.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// nodeIncluded is upstream's stable node set: a node is a load-balancer
// target unless it is being deleted, labelled
// node.kubernetes.io/exclude-from-external-load-balancers, or tainted for
// deletion by the cluster autoscaler. Readiness does not matter (the load
// balancer's health checks decide), so the set changes rarely.
func nodeIncluded(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil {
		return false
	}
	if v, ok := n.Labels[corev1.LabelNodeExcludeBalancers]; ok {
		if excluded, err := strconv.ParseBool(v); err != nil || excluded {
			return false
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == toBeDeletedTaint {
			return false
		}
	}
	return true
}

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
