package foundation

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// Event reasons the router uses on Nodes it cannot place.
const (
	reasonAmbiguousNode  = "AmbiguousNodeOwner"
	reasonNodeNotClaimed = "NodeOwnerNotFound"
)

// initialised holds once the uninitialized taint is gone.
func initialised(n *corev1.Node) (bool, string) {
	return !framework.HasTaint(n, framework.UninitializedTaint),
		fmt.Sprintf("taints %v providerID %q labels %v", n.Spec.Taints, n.Spec.ProviderID, n.Labels)
}

func TestNodeWithProviderIDIsInitialised(t *testing.T) {
	t.Parallel()
	cp, _ := shared(t)
	ctx := ctxFor(t)
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("bm-1", framework.WithProviderID("baremetal://bm-1"))); err != nil {
		t.Fatal(err)
	}
	// The node controller removes the taint, then patches the addresses.
	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.11"}, {Type: corev1.NodeHostName, Address: "bm-1"}}
	framework.Eventually(t, settle, "bm-1 initialised with its addresses", framework.NodeMatches(cp.Client, "bm-1", func(n *corev1.Node) (bool, string) {
		ok, seen := initialised(n)
		return ok && reflect.DeepEqual(n.Status.Addresses, wantAddrs), fmt.Sprintf("%s addresses %v", seen, n.Status.Addresses)
	}))

	n := getNode(ctx, t, "bm-1")
	wantLabels := map[string]string{
		corev1.LabelTopologyZone:       "rack-a",
		corev1.LabelTopologyRegion:     "dc-1",
		corev1.LabelInstanceTypeStable: "r650",
		"example.com/tier":             "gold",
		string(annotation.NodeBackend): "metal",
	}
	for k, v := range wantLabels {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, n.Labels[k], v, n.Labels)
		}
	}
	if n.Spec.ProviderID != "baremetal://bm-1" {
		t.Errorf("providerID = %q, want it unchanged", n.Spec.ProviderID)
	}
}

func TestNodeWithoutProviderIDIsClaimed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, node string
		tweaks     []framework.NodeTweak
		zone       string
	}{
		{name: "by the name rule", node: "bm-2", zone: "rack-b"},
		{name: "by the label hint", node: "hinted-1", zone: "rack-c",
			tweaks: []framework.NodeTweak{framework.WithLabel(string(annotation.NodeBackend), "metal")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp, _ := shared(t)
			ctx := ctxFor(t)
			if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(tt.node, tt.tweaks...)); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, settle, tt.node+" initialised", framework.NodeMatches(cp.Client, tt.node, initialised))
			n := getNode(ctx, t, tt.node)
			if want := "baremetal://" + tt.node; n.Spec.ProviderID != want {
				t.Errorf("providerID = %q, want %q", n.Spec.ProviderID, want)
			}
			if n.Labels[string(annotation.NodeBackend)] != "metal" || n.Labels[corev1.LabelTopologyZone] != tt.zone {
				t.Errorf("labels = %v, want %s=metal and zone %s", n.Labels, annotation.NodeBackend, tt.zone)
			}
		})
	}
}

func TestNodesNoBackendOwnsStayTainted(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, node, reason, mention string }{
		{"claimed by two backends", "dup-1", reasonAmbiguousNode, "metal2"},
		{"claimed by none", "stray-1", reasonNodeNotClaimed, string(annotation.NodeBackend)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp, _ := shared(t)
			ctx := ctxFor(t)
			if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(tt.node)); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, settle, "Warning "+tt.reason+" on "+tt.node,
				framework.EventSeen(cp.Client, "Node", "", tt.node, corev1.EventTypeWarning, tt.reason))
			evs, err := framework.Events(ctx, cp.Client, "Node", "", tt.node)
			if err != nil {
				t.Fatal(err)
			}
			if ev := framework.FindEvent(evs, corev1.EventTypeWarning, tt.reason); !strings.Contains(ev.Message, tt.mention) {
				t.Errorf("event message %q should mention %q", ev.Message, tt.mention)
			}
			n := getNode(ctx, t, tt.node)
			if !framework.HasTaint(n, framework.UninitializedTaint) || n.Spec.ProviderID != "" || n.Labels[string(annotation.NodeBackend)] != "" {
				t.Errorf("node changed: taints %v providerID %q labels %v; want it left tainted and untouched", n.Spec.Taints, n.Spec.ProviderID, n.Labels)
			}
		})
	}
}

// TestNodeLifecycle checks the one path that deletes Nodes: a NotReady node
// whose machine left the inventory goes; a NotReady node still in the
// inventory and a NotReady node of a scheme no backend owns stay, unchanged.
func TestNodeLifecycle(t *testing.T) {
	t.Parallel()
	cp, _ := shared(t)
	ctx := ctxFor(t)
	notReady := []framework.NodeTweak{framework.WithoutUninitializedTaint(), framework.WithReady(corev1.ConditionFalse)}
	nodes := map[string]string{
		"bm-gone": "baremetal://bm-gone", // not in the inventory
		"bm-3":    "baremetal://bm-3",    // in the inventory
		"kind-x":  "kind://x",            // nobody's scheme
	}
	versions := map[string]string{}
	for name, id := range nodes {
		n, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(name, append([]framework.NodeTweak{framework.WithProviderID(id)}, notReady...)...))
		if err != nil {
			t.Fatal(err)
		}
		versions[name] = n.ResourceVersion
	}
	framework.Eventually(t, settle, "bm-gone deleted", framework.NodeGone(cp.Client, "bm-gone"))

	// The lifecycle controller has swept every node at least once; watch
	// the others through several more sweeps and a status update period.
	// bm-3 may gain its addresses (the node controller's periodic update);
	// kind-x must not change at all.
	framework.Consistently(t, quiet, "bm-3 kept and kind-x unchanged", func(ctx context.Context) (bool, string, error) {
		if _, err := cp.Client.CoreV1().Nodes().Get(ctx, "bm-3", metav1.GetOptions{}); err != nil {
			return false, "bm-3: " + err.Error(), nil
		}
		return unchanged(cp, "kind-x", versions["kind-x"])(ctx)
	})
}

// unchanged holds while the node exists at resource version rv.
func unchanged(cp *framework.ControlPlane, name, rv string) framework.Condition {
	return func(ctx context.Context) (bool, string, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return n.ResourceVersion == rv, fmt.Sprintf("resourceVersion %s (was %s), taints %v, labels %v", n.ResourceVersion, rv, n.Spec.Taints, n.Labels), nil
	}
}

func getNode(ctx context.Context, t *testing.T, name string) *corev1.Node {
	t.Helper()
	cp := suite.ControlPlane(t)
	n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
