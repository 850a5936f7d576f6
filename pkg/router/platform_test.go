package router

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	routecontroller "k8s.io/cloud-provider/controllers/route"
	upstreamfake "k8s.io/cloud-provider/fake"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/dispatch"
)

// spyCloud is a backend with instances and routes that answers every
// instance call as configured and counts them: a test that expects it never
// to be asked about a node checks calls.
type spyCloud struct {
	*upstreamfake.Cloud
	exists, shutdown bool
	md               *cloudprovider.InstanceMetadata
	calls            atomic.Int64
	creates          atomic.Int64
}

func newSpy(exists, shutdown bool, md *cloudprovider.InstanceMetadata) *spyCloud {
	return &spyCloud{Cloud: &upstreamfake.Cloud{EnableInstancesV2: true, DisableLoadBalancers: true}, exists: exists, shutdown: shutdown, md: md}
}

func (c *spyCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }
func (c *spyCloud) Routes() (cloudprovider.Routes, bool)           { return c, true }

func (c *spyCloud) InstanceExists(context.Context, *corev1.Node) (bool, error) {
	c.calls.Add(1)
	return c.exists, nil
}

func (c *spyCloud) InstanceShutdown(context.Context, *corev1.Node) (bool, error) {
	c.calls.Add(1)
	return c.shutdown, nil
}

func (c *spyCloud) InstanceMetadata(context.Context, *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	c.calls.Add(1)
	md := *c.md
	return &md, nil
}

func (c *spyCloud) ListRoutes(context.Context, string) ([]*cloudprovider.Route, error) {
	return nil, nil
}

func (c *spyCloud) CreateRoute(context.Context, string, string, *cloudprovider.Route) error {
	c.creates.Add(1)
	return nil
}

func (c *spyCloud) DeleteRoute(context.Context, string, *cloudprovider.Route) error { return nil }

// askedCloud is the router as upstream's controllers see it, counting per
// node the instance calls they make: a test waits until every node was
// asked, then checks what changed.
type askedCloud struct {
	*Router
	mu    sync.Mutex
	asked map[string]int
}

func newAsked(r *Router) *askedCloud { return &askedCloud{Router: r, asked: map[string]int{}} }

func (c *askedCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

func (c *askedCloud) count(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked[n.Name]++
}

// allAsked reports whether every node was asked at least times times.
func (c *askedCloud) allAsked(nodes []*corev1.Node, times int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range nodes {
		if c.asked[n.Name] < times {
			return false
		}
	}
	return true
}

func (c *askedCloud) InstanceExists(ctx context.Context, n *corev1.Node) (bool, error) {
	defer c.count(n)
	return c.Router.InstanceExists(ctx, n)
}

func (c *askedCloud) InstanceMetadata(ctx context.Context, n *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	defer c.count(n)
	return c.Router.InstanceMetadata(ctx, n)
}

func withPlatformAnnotation(p string) testutil.NodeTweak {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[providerid.PlatformAnnotation] = p
	}
}

func withShutdownTaint(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: cloudproviderapi.TaintNodeShutdown, Effect: corev1.TaintEffectNoSchedule})
}

// restrict turns the vSphere platform off the way the test case says:
// nodes.platforms or --cloud-provider-platforms.
func restrict(t *testing.T, r *Router, how string, platforms ...string) {
	t.Helper()
	switch how {
	case "config":
		r.Cfg.Nodes.Platforms = platforms
	case "flag":
		dispatch.SetPlatforms(platforms)
		t.Cleanup(func() { dispatch.SetPlatforms(nil) })
	default:
		t.Fatalf("restrict %q", how)
	}
}

// foreignNodes are nodes of other CCMs, for a router serving only
// baremetal with a vSphere backend turned off.
func foreignNodes(tweaks ...testutil.NodeTweak) []*corev1.Node {
	with := func(more ...testutil.NodeTweak) []testutil.NodeTweak { return append(slices.Clone(tweaks), more...) }
	return []*corev1.Node{
		newNode("vm-off", with(withProviderID("vsphere://4211-aa"))...),                            // a backend's platform turned off
		newNode("vm-shut", with(withProviderID("vsphere://4211-bb"), withShutdownTaint)...),        // its CCM shutdown-tainted it
		newNode("ec2-1", with(withProviderID("aws:///us-east-1a/i-0abc"))...),                      // no backend, platforms declared
		newNode("hc-1", with(withPlatformAnnotation("hcloud"))...),                                 // annotated, no providerID
		newNode("vs-ann", with(withPlatformAnnotation("vsphere"))...),                              // annotated with the platform turned off
		newNode("hint-vs", with(withNodeBackend("vs"))...),                                         // labelled for the backend turned off
		newNode("bm-1", with(withProviderID("vsphere://4211-cc"), withNodeBackend("vs"))...),       // named like a machine of ours
		newNode("asked-1", with(withPlatformAnnotation("vsphere"), withInternalIP("10.9.9.9"))...), // ditto, annotated
	}
}

// TestForeignNodesLeftAloneByLifecycleController drives upstream's
// cloud-node-lifecycle controller over NotReady nodes of other CCMs
// (KEP-5778): none is deleted, no taint changes, and the backend whose
// platform is turned off (it would answer "gone" and "shut down") is never
// asked. A node of ours whose machine is gone is deleted, which shows the
// controller ran.
func TestForeignNodesLeftAloneByLifecycleController(t *testing.T) {
	for _, how := range []string{"config", "flag"} {
		t.Run(how, func(t *testing.T) {
			vs := newSpy(false, true, nil)
			r := metalRouter(t, "error", Backend{Name: "vs", Type: "vsphere", Scheme: "vsphere", Cloud: vs})
			restrict(t, r, how, "baremetal")
			nodes := append(foreignNodes(notReady), newNode("bm-gone", withProviderID("baremetal://bm-gone"), notReady))
			c := startCluster(t, r, objects(nodes)...)
			before := map[string]*corev1.Node{}
			for _, n := range nodes {
				before[n.Name], _ = c.node(t, n.Name)
			}
			asked := newAsked(r)
			c.runNodeLifecycle(t, asked)
			eventually(t, "bm-gone deleted", func() bool { _, ok := c.node(t, "bm-gone"); return !ok })
			eventually(t, "every foreign node asked 5 times", func() bool { return asked.allAsked(foreignNodes(), 5) })
			for _, want := range foreignNodes(notReady) {
				checkUntouched(t, c, before[want.Name])
			}
			if n := vs.calls.Load(); n != 0 {
				t.Errorf("the vSphere backend, turned off, was asked %d times", n)
			}
		})
	}
}

// checkUntouched fails unless the node is as it was: not deleted, same
// spec (taints, providerID), labels, annotations and addresses, and no
// event on it.
func checkUntouched(t *testing.T, c *fakeCluster, was *corev1.Node) {
	t.Helper()
	n, ok := c.node(t, was.Name)
	if !ok {
		t.Errorf("node %s was deleted", was.Name)
		return
	}
	if !equality.Semantic.DeepEqual(n.Spec, was.Spec) || !equality.Semantic.DeepEqual(n.Labels, was.Labels) ||
		!equality.Semantic.DeepEqual(n.Annotations, was.Annotations) || !equality.Semantic.DeepEqual(n.Status.Addresses, was.Status.Addresses) {
		t.Errorf("node %s changed:\nspec %+v\nwas  %+v\nlabels %v, was %v\naddresses %v, was %v", was.Name, n.Spec, was.Spec, n.Labels, was.Labels, n.Status.Addresses, was.Status.Addresses)
	}
	if ev := c.events(t, was.Name); len(ev) > 0 {
		t.Errorf("events on node %s: %v", was.Name, ev)
	}
}

// TestForeignNodesLeftAloneByNodeController drives upstream's cloud-node
// controller, initialising and refreshing every 50 ms, over other CCMs'
// nodes, uninitialised and initialised: none is initialised, none gets
// addresses, labels or a providerID, and the backend whose platform is
// turned off (it would claim every node, with addresses) is never asked.
// A node annotated with a platform we serve is claimed by that platform's
// backend only.
func TestForeignNodesLeftAloneByNodeController(t *testing.T) {
	for _, how := range []string{"config", "flag"} {
		t.Run(how, func(t *testing.T) {
			vs := newSpy(true, false, &cloudprovider.InstanceMetadata{ProviderID: "vsphere://4211-zz", Zone: "vs-zone",
				NodeAddresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.1.1"}}})
			r := metalRouter(t, "error", Backend{Name: "vs", Type: "vsphere", Scheme: "vsphere", Cloud: vs})
			restrict(t, r, how, "baremetal")
			nodes := foreignNodes(uninitialized)
			for _, n := range foreignNodes(withInternalIP("10.7.7.7")) {
				n.Name += "-up"
				nodes = append(nodes, n)
			}
			nodes = append(nodes,
				newNode("hint-1", withPlatformAnnotation("baremetal"), uninitialized), // ours by its annotation
				newNode("rule-1", withProviderID("baremetal://rule-1"), withInternalIP("10.0.0.99")))
			c := startCluster(t, r, objects(nodes)...)
			before := map[string]*corev1.Node{}
			for _, n := range nodes {
				before[n.Name], _ = c.node(t, n.Name)
			}
			asked := newAsked(r)
			ctrl, err := nodecontroller.NewCloudNodeController(c.factory.Core().V1().Nodes(), c.client, asked, 50*time.Millisecond, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			c.run(t, func(ctx context.Context) {
				ctrl.RunWithContext(ctx, controllersmetrics.NewControllerManagerMetrics("test"))
			})

			eventually(t, "hint-1 initialised", func() bool {
				n, _ := c.node(t, "hint-1")
				return !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) && n.Spec.ProviderID == "baremetal://hint-1"
			})
			// rule-1, initialised, gets its inventory address from the
			// status refresh that also asks about the foreign "-up" nodes.
			eventually(t, "rule-1's addresses refreshed", func() bool {
				n, _ := c.node(t, "rule-1")
				return len(n.Status.Addresses) == 1 && n.Status.Addresses[0].Address == "10.0.0.12"
			})
			// Uninitialised ones are retried with a back-off; initialised
			// ones are refreshed every 50 ms.
			eventually(t, "every foreign node asked 3 times", func() bool { return asked.allAsked(nodes[:len(nodes)-2], 3) })
			for _, was := range nodes {
				if was.Name != "hint-1" && was.Name != "rule-1" {
					checkUntouched(t, c, before[was.Name])
				}
			}
			if n := vs.calls.Load(); n != 0 {
				t.Errorf("the vSphere backend, turned off, was asked %d times", n)
			}
		})
	}
}

// TestForeignNodeAnswers checks the router's answers for other CCMs' nodes
// one by one: they exist and are running, have no metadata while
// uninitialised and only their own providerID once initialised, and no
// backend is asked; nodes of platforms served, and of unknown schemes
// while no platforms are declared, are not foreign.
func TestForeignNodeAnswers(t *testing.T) {
	vs := newSpy(false, true, &cloudprovider.InstanceMetadata{ProviderID: "vsphere://x"})
	metal := newSpy(true, false, &cloudprovider.InstanceMetadata{ProviderID: "baremetal://bm-1"})
	r := mustRouter(t, testConfig(func(c *config.CloudConfig) { c.Nodes.Platforms = []string{"baremetal"} }),
		Backend{Name: "metal", Type: "baremetal", Scheme: "baremetal", Cloud: metal}, Backend{Name: "vs", Type: "vsphere", Scheme: "vsphere", Cloud: vs})
	if got := r.ServedPlatforms(); !slices.Equal(got, []string{"baremetal"}) {
		t.Errorf("ServedPlatforms = %v", got)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		node     *corev1.Node
		platform string
	}{
		{newNode("a", withProviderID("vsphere://x"), uninitialized), "vsphere"},
		{newNode("b", withProviderID("vsphere://x")), "vsphere"},
		{newNode("c", withProviderID("gce://p/z/c")), "gce"},
		{newNode("d", withPlatformAnnotation("hcloud"), uninitialized), "hcloud"},
		{newNode("e", withNodeBackend("vs")), "vsphere"},
	} {
		n := tc.node
		if p, ok := r.ForeignPlatform(n); !ok || p != tc.platform {
			t.Errorf("%s: ForeignPlatform = %q, %v; want %q", n.Name, p, ok, tc.platform)
		}
		if ok, err := r.InstanceExists(ctx, n); !ok || err != nil {
			t.Errorf("%s: InstanceExists = %v, %v; want true, nil", n.Name, ok, err)
		}
		if off, err := r.InstanceShutdown(ctx, n); off || err != nil {
			t.Errorf("%s: InstanceShutdown = %v, %v; want false, nil", n.Name, off, err)
		}
		md, err := r.InstanceMetadata(ctx, n)
		if hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) {
			if err == nil || !strings.Contains(err.Error(), "belongs to another cloud-controller-manager") {
				t.Errorf("%s: uninitialised: InstanceMetadata = %+v, %v; want an error", n.Name, md, err)
			}
		} else if err != nil || !equality.Semantic.DeepEqual(*md, cloudprovider.InstanceMetadata{ProviderID: n.Spec.ProviderID}) {
			t.Errorf("%s: initialised: InstanceMetadata = %+v, %v; want its own providerID only", n.Name, md, err)
		}
	}
	if vs.calls.Load()+metal.calls.Load() != 0 {
		t.Errorf("backends asked about other CCMs' nodes: vsphere %d, baremetal %d", vs.calls.Load(), metal.calls.Load())
	}
	for _, n := range []*corev1.Node{
		newNode("own", withProviderID("baremetal://bm-1")),
		newNode("own-ann", withPlatformAnnotation("baremetal")),
		newNode("ann-ignored", withProviderID("baremetal://bm-1"), withPlatformAnnotation("hcloud")),
		newNode("bad", withProviderID("not-a-provider-id")),
		newNode("nothing"),
	} {
		if p, ok := r.ForeignPlatform(n); ok {
			t.Errorf("%s: ForeignPlatform = %q, true; want ours", n.Name, p)
		}
	}
	undeclared := mustRouter(t, testConfig(), Backend{Name: "metal", Type: "baremetal", Scheme: "baremetal", Cloud: metal})
	kind := newNode("kind-1", withProviderID("kind://docker/kind/kind-1"))
	if _, ok := undeclared.ForeignPlatform(kind); ok {
		t.Error("kind:// with no platforms declared is foreign; want nodes.unmanaged to decide, as before")
	}
	if _, err := undeclared.InstanceExists(ctx, kind); err == nil || !strings.Contains(err.Error(), "no backend owns this providerID scheme") {
		t.Errorf("kind:// under nodes.unmanaged: error: InstanceExists error = %v", err)
	}
}

// TestRoutesSkipForeignNodes drives upstream's route controller: a node of
// another CCM, on a platform whose backend has routes but is turned off,
// gets no route of ours; our own node does.
func TestRoutesSkipForeignNodes(t *testing.T) {
	vs := newSpy(true, false, nil)
	metal := &upstreamfake.Cloud{EnableInstancesV2: true, ExistsByProviderID: true, DisableLoadBalancers: true, RouteMap: map[string]*upstreamfake.Route{}}
	r := mustRouter(t, testConfig(func(c *config.CloudConfig) { c.Nodes.Platforms = []string{"baremetal"} }),
		Backend{Name: "metal", Type: "baremetal", Scheme: "baremetal", Cloud: metal},
		Backend{Name: "vs", Type: "vsphere", Scheme: "vsphere", Cloud: vs})
	c := startCluster(t, r, newNode("vm-1", withProviderID("vsphere://4211"), withPodCIDR("10.244.1.0/24")),
		newNode("bm-1", withProviderID("baremetal://bm-1"), withPodCIDR("10.244.2.0/24")))
	_, clusterCIDR, _ := net.ParseCIDR("10.244.0.0/16")
	ctrl, err := routecontroller.New(r, c.client, c.factory.Core().V1().Nodes(), cluster, []*net.IPNet{clusterCIDR})
	if err != nil {
		t.Fatal(err)
	}
	c.run(t, func(ctx context.Context) {
		ctrl.Run(ctx, 50*time.Millisecond, controllersmetrics.NewControllerManagerMetrics("test"))
	})
	// A reconcile creates every route, then sets every node's
	// NetworkUnavailable condition (upstream does so for any node whose
	// CreateRoute succeeded, and the router skips another CCM's node with
	// success: an error would make it NetworkUnavailable=True).
	eventually(t, "bm-1 routed and vm-1's condition set", func() bool {
		n, _ := c.node(t, "vm-1")
		metal.Lock.Lock()
		routes := len(metal.RouteMap)
		metal.Lock.Unlock()
		return routes == 1 && slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeNetworkUnavailable })
	})
	if n := vs.creates.Load(); n != 0 {
		t.Errorf("%d routes created in the vSphere backend for another CCM's node", n)
	}
	if n := vs.calls.Load(); n != 0 {
		t.Errorf("the vSphere backend was asked about another CCM's node %d times", n)
	}
}

// runNodeController runs upstream's cloud-node controller over cloud,
// refreshing initialised nodes every 50 ms, until the test ends.
func (c *fakeCluster) runNodeController(t *testing.T, cloud cloudprovider.Interface) {
	t.Helper()
	ctrl, err := nodecontroller.NewCloudNodeController(c.factory.Core().V1().Nodes(), c.client, cloud, 50*time.Millisecond, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	c.run(t, func(ctx context.Context) {
		ctrl.RunWithContext(ctx, controllersmetrics.NewControllerManagerMetrics("test"))
	})
}

func withPlatformLabel(p string) testutil.NodeTweak { return withLabel(providerid.PlatformLabel, p) }

// TestUpstreamDropsPlatformLabel is the trap the router's own label write
// avoids: upstream's cloud-node controller drops every
// InstanceMetadata.AdditionalLabels key under kubernetes.io or k8s.io,
// node.cloudprovider.kubernetes.io/platform included, and keeps the others.
func TestUpstreamDropsPlatformLabel(t *testing.T) {
	cloud := &upstreamfake.Cloud{EnableInstancesV2: true, DisableLoadBalancers: true, DisableRoutes: true,
		OverrideInstanceMetadata: func(context.Context, *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
			return &cloudprovider.InstanceMetadata{ProviderID: "baremetal://n", AdditionalLabels: map[string]string{
				providerid.PlatformLabel: "baremetal", "example.com/kept": "yes"}}, nil
		}}
	r := mustRouter(t, testConfig())
	c := startCluster(t, r, newNode("n", uninitialized))
	c.runNodeController(t, cloud)
	eventually(t, "n initialised", func() bool { n, _ := c.node(t, "n"); return n.Spec.ProviderID == "baremetal://n" })
	n, _ := c.node(t, "n")
	if _, ok := n.Labels[providerid.PlatformLabel]; ok || n.Labels["example.com/kept"] != "yes" {
		t.Errorf("labels %v: upstream no longer drops %s from AdditionalLabels; the router's own write may be dropped", n.Labels, providerid.PlatformLabel)
	}
}

// TestPlatformLabelThroughNodeController drives upstream's cloud-node
// controller: every node the router initialises carries
// node.cloudprovider.kubernetes.io/platform=<backend type> beside
// multicloud-ccm.io/backend, whichever way its backend was found; a node
// initialised before (an upgrade) gets it at its next refresh; a value
// already there (the kubelet's --node-labels) is kept.
func TestPlatformLabelThroughNodeController(t *testing.T) {
	r := metalRouter(t, "error")
	c := startCluster(t, r,
		newNode("bm-1", withProviderID("baremetal://bm-1"), uninitialized),
		newNode("rule-1", uninitialized),
		newNode("asked-1", withPlatformAnnotation("baremetal"), uninitialized),
		newNode("hint-1", withProviderID("baremetal://hint-1"), withNodeBackend("metal")),
		newNode("both-1", withProviderID("baremetal://both-1"), withPlatformLabel("proxmox"), uninitialized))
	c.runNodeController(t, r)
	for name, want := range map[string]string{"bm-1": "baremetal", "rule-1": "baremetal", "asked-1": "baremetal", "hint-1": "baremetal", "both-1": "proxmox"} {
		eventually(t, name+" initialised with its labels", func() bool {
			n, _ := c.node(t, name)
			return !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) && n.Labels[string(annotation.NodeBackend)] == "metal" &&
				n.Labels[providerid.PlatformLabel] == want
		})
	}
}

// TestOwnNodes: the nodes a load balancer may be handed leave out other
// CCMs' nodes, keep the order, and are the caller's own slice, untouched,
// when none is foreign.
func TestOwnNodes(t *testing.T) {
	r := mustRouter(t, testConfig(func(c *config.CloudConfig) { c.Nodes.Platforms = []string{"baremetal"} }),
		Backend{Name: "metal", Type: "baremetal", Scheme: "baremetal", Cloud: instanceCloud(true, nil)},
		Backend{Name: "vs", Type: "vsphere", Scheme: "vsphere", Cloud: instanceCloud(true, nil)})
	bm1, bm2 := newNode("bm-1", withProviderID("baremetal://bm-1")), newNode("bm-2")
	vm, hc := newNode("vm-1", withProviderID("vsphere://4211")), newNode("hc-1", withPlatformAnnotation("hcloud"))
	nodes := []*corev1.Node{vm, bm1, hc, bm2}
	got := r.OwnNodes(nodes)
	if !slices.Equal(got, []*corev1.Node{bm1, bm2}) {
		t.Errorf("OwnNodes = %v", nodeNames(got))
	}
	if !slices.Equal(nodes, []*corev1.Node{vm, bm1, hc, bm2}) {
		t.Errorf("OwnNodes changed its argument: %v", nodeNames(nodes))
	}
	own := []*corev1.Node{bm1, bm2}
	if got := r.OwnNodes(own); &got[0] != &own[0] || len(got) != 2 {
		t.Error("OwnNodes copied a list with no foreign node")
	}
}

// TestLoadBalancersSkipOtherCCMsNodes: a load balancer is handed only the
// nodes of the platforms served here (KEP-5778's non-goal) on create,
// update and the node re-sync's comparison, and every node again when the
// operator sets loadBalancer.targetOtherCCMsNodes.
func TestLoadBalancersSkipOtherCCMsNodes(t *testing.T) {
	nodes := []*corev1.Node{
		newNode("bm-1", withProviderID("baremetal://bm-1"), testutil.WithInternalIP("10.0.0.1")),
		newNode("hc-1", withPlatformAnnotation("hcloud"), testutil.WithInternalIP("10.0.0.2")),
		newNode("aws-1", withProviderID("aws:///us-east-1a/i-0123"), testutil.WithInternalIP("10.0.0.3")),
	}
	for _, tc := range []struct {
		name string
		all  bool
		want []string
	}{
		{name: "own nodes only", want: []string{"bm-1"}},
		{name: "operator asks for every node", all: true, want: []string{"bm-1", "hc-1", "aws-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := newLBCloud("lb", "192.0.2.1")
			lb.DisableInstances, lb.EnableInstancesV2 = false, true // the bare-metal platform is served for its instances
			r := mustRouter(t, testConfig(func(c *config.CloudConfig) {
				c.Nodes.Platforms = []string{"baremetal"}
				c.LoadBalancer.DefaultBackend = "metal"
				c.LoadBalancer.TargetOtherCCMsNodes = tc.all
			}), Backend{Name: "metal", Type: "baremetal", Scheme: "baremetal", Cloud: targeter{lb}})
			svc := newService("s")
			if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nodes); err != nil {
				t.Fatal(err)
			}
			if got := lb.nodes[svc.UID]; !slices.Equal(got, tc.want) {
				t.Errorf("EnsureLoadBalancer handed %v, want %v", got, tc.want)
			}
			if err := r.UpdateLoadBalancer(context.Background(), cluster, svc, nodes); err != nil {
				t.Fatal(err)
			}
			if got := lb.nodes[svc.UID]; !slices.Equal(got, tc.want) {
				t.Errorf("UpdateLoadBalancer handed %v, want %v", got, tc.want)
			}
			if got := nodeNames(r.LoadBalancerTargets(svc, nodes)); !slices.Equal(got, tc.want) {
				t.Errorf("LoadBalancerTargets = %v, want %v", got, tc.want)
			}
		})
	}
}
