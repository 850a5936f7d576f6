package router

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	upstreamfake "k8s.io/cloud-provider/fake"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/dispatch"
)

// notMine is an instance backend that answers "gone" for every node and
// records which nodes it was asked about.
type notMine struct {
	*upstreamfake.Cloud
	mu    sync.Mutex
	asked map[string]int
}

func newNotMine() *notMine {
	return &notMine{Cloud: &upstreamfake.Cloud{DisableLoadBalancers: true, DisableRoutes: true}, asked: map[string]int{}}
}

func (c *notMine) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

func (c *notMine) InstanceExists(_ context.Context, n *corev1.Node) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked[n.Name]++
	return false, nil
}

func (c *notMine) InstanceShutdown(_ context.Context, n *corev1.Node) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked[n.Name]++
	return false, nil
}

func (c *notMine) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asked[name]
}

// TestLabelNamingARemovedBackendKeepsTheNode drives the upstream
// node-lifecycle controller after one of two OpenStack clouds was removed
// from the config: the remaining cloud answers "not mine" for the removed
// one's nodes, which must never be asked of it nor deleted, whatever the
// nodes.unmanaged setting; they get an UnknownBackend Warning event. A node
// of the remaining cloud that it reports gone is deleted, proving the
// controller ran.
func TestLabelNamingARemovedBackendKeepsTheNode(t *testing.T) {
	for _, unmanaged := range []config.UnmanagedPolicy{config.UnmanagedError, config.UnmanagedIgnore} {
		t.Run("unmanaged="+string(unmanaged), func(t *testing.T) {
			remaining := newNotMine()
			cfg := testConfig(func(c *config.CloudConfig) { c.Nodes.Unmanaged = unmanaged })
			r := mustRouter(t, cfg, Backend{Name: "os-b", Type: "openstack", Scheme: "openstack", Cloud: remaining})
			nodes := []*corev1.Node{
				newNode("os-a-1", withProviderID("openstack:///0b9e"), withNodeBackend("os-a"), notReady),
				// Labelled with a backend of another scheme: not os-b's either.
				newNode("odd-1", withProviderID("openstack:///77aa"), withNodeBackend("os-b-vsphere"), notReady),
				newNode("os-b-gone", withProviderID("openstack:///5c1d"), withNodeBackend("os-b"), notReady),
			}
			c := startCluster(t, r, objects(nodes)...)
			c.runNodeLifecycle(t, r)
			eventually(t, "os-b-gone deleted", func() bool { _, ok := c.node(t, "os-b-gone"); return !ok })
			for _, name := range []string{"os-a-1", "odd-1"} {
				if _, ok := c.node(t, name); !ok {
					t.Fatalf("node %s, labelled with a backend that is not configured, was deleted", name)
				}
				eventually(t, name+" UnknownBackend event", func() bool {
					return strings.Contains(strings.Join(c.events(t, name), ","), "Warning/"+dispatch.ReasonUnknownBackend)
				})
				if n := remaining.count(name); n != 0 {
					t.Errorf("node %s was asked of backend os-b %d times", name, n)
				}
			}
		})
	}
}

// TestLabelRuleWithSharedScheme: with two backends of the scheme, a label
// naming neither is an error too, never a question to either.
func TestLabelRuleWithSharedScheme(t *testing.T) {
	a, b := instanceCloud(false, nil), instanceCloud(false, nil)
	r := mustRouter(t, testConfig(ignoreUnmanaged), awsB("aws-a", a), awsB("aws-b", b))
	for _, fn := range []func(context.Context, *corev1.Node) (bool, error){r.InstanceExists, r.InstanceShutdown} {
		got, err := fn(context.Background(), newNode("i", withProviderID("aws:///us-east-1a/i-1"), withNodeBackend("aws-c")))
		checkErr(t, err, `label multicloud-ccm.io/backend="aws-c" names no configured backend serving aws://`)
		if got {
			t.Error("answered true with an error")
		}
	}
	if _, err := r.InstanceMetadata(context.Background(), newNode("i", withProviderID("aws:///us-east-1a/i-1"), withNodeBackend("aws-c"))); err == nil {
		t.Error("InstanceMetadata for a node of a removed backend succeeded")
	}
	if len(a.Calls)+len(b.Calls) != 0 {
		t.Errorf("the configured backends were asked: %v %v", a.Calls, b.Calls)
	}
}
