package lbcontroller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestNodeSetFingerprint: the fingerprint of a set of targets ignores the
// order and duplicates, and changes with a node added, removed, renamed
// or given another providerID.
func TestNodeSetFingerprint(t *testing.T) {
	n := func(name, pid string) *corev1.Node { return utilt.NewNode(name, utilt.WithProviderID(pid)) }
	a, b, c := n("a", "aws:///z/i-1"), n("b", "aws:///z/i-2"), n("c", "aws:///z/i-3")
	base := setOf([]*corev1.Node{a, b, c})
	if !setOf([]*corev1.Node{c, a, b, a}).equal(base) {
		t.Error("another order, or a node listed twice, changed the fingerprint")
	}
	if base.len() != 3 {
		t.Errorf("len = %d, want 3", base.len())
	}
	for name, other := range map[string][]*corev1.Node{
		"a node added":        {a, b, c, n("d", "aws:///z/i-4")},
		"a node removed":      {a, b},
		"a providerID change": {a, b, n("c", "aws:///z/i-9")},
		"a node renamed":      {a, b, n("c2", "aws:///z/i-3")},
		"swapped providerIDs": {n("a", "aws:///z/i-2"), n("b", "aws:///z/i-1"), c},
		"none":                nil,
	} {
		if setOf(other).equal(base) {
			t.Errorf("%s: same fingerprint", name)
		}
	}
	if !setOf(nil).equal(nodeSet{}) {
		t.Error("the empty set's fingerprint is not the zero value")
	}
}

// TestNodeSetByBackendFingerprint: the fingerprint of several backends'
// targets counts each node once, and changes when a node moves into or
// out of one backend's targets while another backend targets it
// throughout (the union of the targets the same).
func TestNodeSetByBackendFingerprint(t *testing.T) {
	n := func(name string) *corev1.Node { return utilt.NewNode(name, utilt.WithProviderID("baremetal://"+name)) }
	a, b := n("a"), n("b")
	before := setOfByBackend(map[string][]*corev1.Node{"aws": {a}, "octavia": {a, b}})
	after := setOfByBackend(map[string][]*corev1.Node{"aws": {a, b}, "octavia": {b, a}})
	if before.equal(after) {
		t.Error("b joining the aws backend's targets left the fingerprint unchanged")
	}
	if before.len() != 2 || after.len() != 2 {
		t.Errorf("len = %d and %d, want 2 (distinct nodes)", before.len(), after.len())
	}
	if !setOfByBackend(map[string][]*corev1.Node{"octavia": {b, a, a}, "aws": {a}}).equal(before) {
		t.Error("another order, or a node listed twice, changed the fingerprint")
	}
}
