package router

import (
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
)

// nodePatches counts, per node, the PATCH requests on nodes (not
// nodes/status) that reach the fake API server, and refuses them with
// Forbidden when forbid is set, as RBAC does for an identity without
// patch on nodes.
type nodePatches struct {
	mu     sync.Mutex
	n      map[string]int
	forbid bool
}

func (p *nodePatches) react(a clienttesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "" {
		return false, nil, nil
	}
	name := a.(clienttesting.PatchAction).GetName()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[name]++
	if p.forbid {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, name, nil)
	}
	return false, nil, nil
}

func (p *nodePatches) count(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[name]
}

// TestPlatformLabelPatchedOnce drives upstream's cloud-node controller,
// refreshing every 50 ms, over nodes the router serves and counts the
// router's Node PATCHes: the platform label is written once per node, not
// at every metadata call (the status refresh asks every node every 5
// minutes by default). When the API server refuses the write (RBAC without
// patch on nodes, as the chart's router identity had), the router does not
// ask again at every refresh either: not one refused PATCH per node per
// refresh, each logged as an error.
func TestPlatformLabelPatchedOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forbid bool
	}{{"written", false}, {"refused", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := metalRouter(t, "error")
			nodes := []*corev1.Node{
				newNode("bm-1", withProviderID("baremetal://bm-1"), uninitialized),
				newNode("rule-1", uninitialized),
				newNode("hint-1", withProviderID("baremetal://hint-1"), withInternalIP("10.0.0.13")),
			}
			c := startCluster(t, r, objects(nodes)...)
			p := &nodePatches{n: map[string]int{}, forbid: tc.forbid}
			testutil.PrependReactor(c.client, "patch", "nodes", p.react)
			asked := newAsked(r)
			c.runNodeController(t, asked)
			for _, name := range []string{"bm-1", "rule-1"} {
				eventually(t, name+" initialised", func() bool {
					n, _ := c.node(t, name)
					return n != nil && !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider)
				})
			}
			eventually(t, "every node's metadata asked 20 times", func() bool { return asked.allAsked(nodes, 20) })
			before := map[string]int{}
			lo := 1 // once refused, the router stops asking for every node
			if tc.forbid {
				lo = 0
			}
			for _, n := range nodes {
				before[n.Name] = p.count(n.Name)
				// The first write: with a real API server, one PATCH; the
				// fake one also takes upstream's initialising Update from
				// its stale cache, which drops the label, written again.
				if before[n.Name] < lo || before[n.Name] > 2 {
					t.Errorf("%s: %d PATCHes of the node for its platform label over its first 20 metadata calls; want 1 (2 at most for an uninitialised node; 0 once refused for another)", n.Name, before[n.Name])
				}
			}
			eventually(t, "every node's metadata asked 40 times", func() bool { return asked.allAsked(nodes, 40) })
			for _, n := range nodes {
				if got := p.count(n.Name); got != before[n.Name] {
					t.Errorf("%s: %d more PATCHes of the node over 20 status refreshes; want none", n.Name, got-before[n.Name])
				}
				n, _ := c.node(t, n.Name)
				if _, has := n.Labels[providerid.PlatformLabel]; has == tc.forbid {
					t.Errorf("%s: labels %v", n.Name, n.Labels)
				}
			}
		})
	}
}
