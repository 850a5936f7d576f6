package aws

import (
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestCanTargetAllocatesNothing: the router asks CanTarget of every node
// (5,000 in the scale cell) for every call of every Service; with
// target-node-labels it allocated per node (a one-node slice and the
// filtered one), now nothing.
func TestCanTargetAllocatesNothing(t *testing.T) {
	lb := &LoadBalancer{}
	svc := newService("web", withAnnotation(AnnotationTargetNodeLabels, "scale.example/target=yes"))
	in := newNode("in", testutil.WithProviderID("aws:///eu-west-1a/i-0000000000000001"))
	in.Labels = map[string]string{"scale.example/target": "yes"}
	out := newNode("out", testutil.WithProviderID("aws:///eu-west-1a/i-0000000000000002"))
	if !lb.CanTarget(svc, in) || lb.CanTarget(svc, out) {
		t.Fatalf("CanTarget: labelled %v, unlabelled %v; want true, false", lb.CanTarget(svc, in), lb.CanTarget(svc, out))
	}
	if n := testing.AllocsPerRun(100, func() { lb.CanTarget(svc, in); lb.CanTarget(svc, out) }); n != 0 {
		t.Errorf("CanTarget allocated %.0f times for two nodes, want 0", n)
	}
}
