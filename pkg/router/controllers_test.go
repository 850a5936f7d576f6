package router

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	upstreamfake "k8s.io/cloud-provider/fake"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/dispatch"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// metalConfig is a cloud-config with a real bare-metal backend.
const metalConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
nodes:
  unmanaged: %s
  rules:
  - backend: metal
    nodeNameRegex: '^rule-'
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: bm-1
      addresses: [{type: InternalIP, address: 10.0.0.11}]
      zone: rack-a
      region: dc-1
      instanceType: r650
    - name: rule-1
      addresses: [{type: InternalIP, address: 10.0.0.12}]
      zone: rack-b
      region: dc-1
    - name: hint-1
      addresses: [{type: InternalIP, address: 10.0.0.13}]
      zone: rack-b
      region: dc-1
    - name: asked-1
      addresses: [{type: InternalIP, address: 10.0.0.14}]
      zone: rack-c
      region: dc-1
    - name: both-1
      addresses: [{type: InternalIP, address: 10.0.0.15}]
    addressPools:
    - name: public
      addresses: ["192.0.2.0/24"]
      autoAssign: true
`

// metalRouter builds a router over the real bare-metal backend plus extra
// backends.
func metalRouter(t *testing.T, unmanaged string, extra ...Backend) *Router {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, metalConfig, unmanaged), "")
	if err != nil {
		t.Fatal(err)
	}
	reg, ok := backends.Lookup("baremetal")
	if !ok {
		t.Fatal("baremetal backend not compiled in")
	}
	cloud, err := reg.New(context.Background(), backends.Options{Name: "metal", ClusterID: "test", Settings: cfg.Backends[0].Settings})
	if err != nil {
		t.Fatal(err)
	}
	return mustRouter(t, cfg, append([]Backend{{Name: "metal", Type: "baremetal", Scheme: "baremetal", Cloud: cloud}}, extra...)...)
}

// cluster is a fake API server with informers and the router initialised
// against it, as the CCM does at start-up.
type fakeCluster struct {
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	router  *Router
}

func startCluster(t *testing.T, r *Router, objs ...runtimeObject) *fakeCluster {
	t.Helper()
	c := &fakeCluster{client: testutil.NewClientset(objs...), router: r}
	c.factory = informers.NewSharedInformerFactory(c.client, 0)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.Initialize(clientBuilder{c.client}, ctx.Done())
	r.SetInformers(c.factory)
	return c
}

func (c *fakeCluster) run(t *testing.T, start func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c.factory.Start(ctx.Done())
	c.factory.WaitForCacheSync(ctx.Done())
	go start(ctx)
}

// runNodeLifecycle runs the upstream cloud-node-lifecycle controller over
// cloud, checking NotReady nodes every 10 ms, until the test ends.
func (c *fakeCluster) runNodeLifecycle(t *testing.T, cloud cloudprovider.Interface) {
	t.Helper()
	ctrl, err := nodelifecycle.NewCloudNodeLifecycleController(c.factory.Core().V1().Nodes(), c.client, cloud, 10*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	c.run(t, func(ctx context.Context) { ctrl.Run(ctx, controllersmetrics.NewControllerManagerMetrics("test")) })
}

func (c *fakeCluster) node(t *testing.T, name string) (*corev1.Node, bool) {
	t.Helper()
	n, err := c.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return n, true
}

// eventsOn returns the events on the named object.
func (c *fakeCluster) eventsOn(t *testing.T, name string) []corev1.Event {
	t.Helper()
	list, err := c.client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(list.Items, func(e corev1.Event) bool { return e.InvolvedObject.Name != name })
}

// events returns the events on the named object as type/reason.
func (c *fakeCluster) events(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, e := range c.eventsOn(t, name) {
		out = append(out, e.Type+"/"+e.Reason)
	}
	return out
}

// failedDeletes returns the messages of the Warning events on the named
// object that report a failed delete of its load balancer (upstream's
// "failed to delete load balancer"). Other Warnings are left out: one
// upstream raises from a stale cache after the Service went (its finalizer
// removal answered NotFound) says nothing about the delete.
func (c *fakeCluster) failedDeletes(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, e := range c.eventsOn(t, name) {
		if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "failed to delete load balancer") {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// eventually waits for cond. The bound is generous because -race on a
// loaded 2-core machine slows the controllers tenfold; passing runs return
// as soon as cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// TestLifecycleControllerOutcomes drives the upstream node-lifecycle
// controller over NotReady nodes of every kind and checks that only the node
// whose instance is positively gone is deleted.
func TestLifecycleControllerOutcomes(t *testing.T) {
	for _, unmanaged := range []string{"error", "ignore"} {
		t.Run("unmanaged="+unmanaged, func(t *testing.T) {
			broken := &counted{Cloud: instanceCloud(false, errCloudDown)}
			broken.ErrShutdownByProviderID = errCloudDown
			shutdown := instanceCloud(true, nil)
			shutdown.NodeShutdown = true
			r := metalRouter(t, unmanaged,
				Backend{Name: "broken", Type: "vsphere", Scheme: "vsphere", Cloud: broken},
				Backend{Name: "off", Type: "openstack", Scheme: "openstack", Cloud: shutdown},
			)
			nodes := []*corev1.Node{
				newNode("bm-1", withProviderID("baremetal://bm-1"), notReady),       // owned and present
				newNode("bm-gone", withProviderID("baremetal://bm-gone"), notReady), // owned and gone
				newNode("kind-1", withProviderID("kind://docker/kind/kind-1"), notReady),
				newNode("stranger", notReady), // no providerID, nobody claims it
				newNode("vm-1", withProviderID("vsphere://4211-aa"), notReady),
				newNode("os-1", withProviderID("openstack:///8d2c"), notReady),
				newNode("bad", withProviderID("not-a-provider-id"), notReady),
			}
			c := startCluster(t, r, objects(nodes)...)
			c.runNodeLifecycle(t, r)
			eventually(t, "bm-gone deleted", func() bool { _, ok := c.node(t, "bm-gone"); return !ok })
			eventually(t, "several monitor rounds", func() bool { return broken.n.Load() >= 10 })
			eventually(t, "os-1 shutdown-tainted", func() bool { n, _ := c.node(t, "os-1"); return hasTaint(n, cloudproviderapi.TaintNodeShutdown) })

			want := map[string]bool{"bm-1": true, "bm-gone": false, "kind-1": true, "stranger": true, "vm-1": true, "os-1": true, "bad": true}
			for name, keep := range want {
				n, exists := c.node(t, name)
				if exists != keep {
					t.Errorf("node %s exists=%v, want %v", name, exists, keep)
				}
				if !exists {
					continue
				}
				tainted := hasTaint(n, cloudproviderapi.TaintNodeShutdown)
				if tainted != (name == "os-1") {
					t.Errorf("node %s shutdown-tainted=%v", name, tainted)
				}
			}
		})
	}
}

// TestNodeControllerInitialisesThroughEveryPath drives the upstream
// cloud-node controller over uninitialised nodes resolved by providerID, the
// label hint, a config rule and by asking the backends, plus an ambiguous
// and an unclaimed node that must stay tainted with a Warning event.
func TestNodeControllerInitialisesThroughEveryPath(t *testing.T) {
	claimsBoth := &upstreamfake.Cloud{EnableInstancesV2: true, DisableLoadBalancers: true, DisableRoutes: true,
		OverrideInstanceMetadata: func(context.Context, *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
			return &cloudprovider.InstanceMetadata{ProviderID: "vsphere://both"}, nil
		}}
	r := metalRouter(t, "error", Backend{Name: "vs", Type: "vsphere", Scheme: "vsphere", Cloud: &claimOnly{Cloud: claimsBoth, names: map[string]bool{"both-1": true}}})
	nodes := []*corev1.Node{
		newNode("bm-1", withProviderID("baremetal://bm-1"), uninitialized),
		newNode("rule-1", uninitialized),
		newNode("hint-1", withNodeBackend("metal"), uninitialized),
		newNode("asked-1", uninitialized),
		newNode("both-1", uninitialized),
		newNode("nobody", uninitialized),
	}
	c := startCluster(t, r, objects(nodes)...)
	ctrl, err := nodecontroller.NewCloudNodeController(c.factory.Core().V1().Nodes(), c.client, r, time.Hour, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	c.run(t, func(ctx context.Context) {
		ctrl.RunWithContext(ctx, controllersmetrics.NewControllerManagerMetrics("test"))
	})

	for name, zone := range map[string]string{"bm-1": "rack-a", "rule-1": "rack-b", "hint-1": "rack-b", "asked-1": "rack-c"} {
		eventually(t, name+" initialised", func() bool {
			n, _ := c.node(t, name)
			return n != nil && !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider)
		})
		n, _ := c.node(t, name)
		if n.Spec.ProviderID != "baremetal://"+name {
			t.Errorf("%s providerID = %q", name, n.Spec.ProviderID)
		}
		if n.Labels[corev1.LabelTopologyZone] != zone || n.Labels[corev1.LabelTopologyRegion] != "dc-1" {
			t.Errorf("%s zone/region labels = %v", name, n.Labels)
		}
		if n.Labels[string(annotation.NodeBackend)] != "metal" {
			t.Errorf("%s backend label = %q", name, n.Labels[string(annotation.NodeBackend)])
		}
	}
	for name, reason := range map[string]string{"both-1": dispatch.ReasonAmbiguousNode, "nobody": dispatch.ReasonNodeNotClaimed} {
		eventually(t, name+" Warning event "+reason, func() bool {
			return strings.Contains(strings.Join(c.events(t, name), ","), "Warning/"+reason)
		})
		n, _ := c.node(t, name)
		if !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) || n.Spec.ProviderID != "" {
			t.Errorf("%s was initialised: taints %v, providerID %q", name, n.Spec.Taints, n.Spec.ProviderID)
		}
	}
}

// claimOnly is an upstream fake cloud that claims only the named nodes.
type claimOnly struct {
	*upstreamfake.Cloud
	names map[string]bool
}

func (c *claimOnly) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

func (c *claimOnly) InstanceExists(_ context.Context, n *corev1.Node) (bool, error) {
	return c.names[n.Name], nil
}

// runServiceController runs the upstream service controller over the
// cluster's router and informers until the test ends or stop is called (a
// crash, as far as the router can tell).
func runServiceController(t *testing.T, c *fakeCluster) (stop func()) {
	t.Helper()
	return testutil.RunServiceController(t, c.router, c.client, c.factory, cluster, 4)
}

func (c *fakeCluster) service(t *testing.T, name string) *corev1.Service {
	t.Helper()
	s, err := c.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ingressIP(s *corev1.Service) string {
	if len(s.Status.LoadBalancer.Ingress) == 0 {
		return ""
	}
	return s.Status.LoadBalancer.Ingress[0].IP
}

// metalAndOther is a router over bare metal and a load-balancer backend
// "other" owning aws:// nodes, whose load balancers get 198.51.100.7.
func metalAndOther(t *testing.T) (*Router, *lbCloud) {
	t.Helper()
	other := newLBCloud("other", "198.51.100.7")
	return metalRouter(t, "error", Backend{Name: "other", Type: "aws", Scheme: "aws", Cloud: other}), other
}

// TestServiceControllerMovesAndCleansUp drives the upstream service
// controller: a Service gets an address from the bare-metal pool, moves to
// another backend when its annotation changes with nothing left in the
// first, and is cleaned up everywhere when deleted.
func TestServiceControllerMovesAndCleansUp(t *testing.T) {
	r, other := metalAndOther(t)
	svc := newService("web", withLBBackend("metal"))
	// No Node: upstream's service controller v0.37 has a data race between
	// its node worker (serviceCache.allServices) and its service worker
	// (cachedService.state), which -race reports. Which nodes each backend
	// receives is tested in loadbalancer_test.go.
	c := startCluster(t, r, svc)
	runServiceController(t, c)

	eventually(t, "an address from the pool", func() bool { return strings.HasPrefix(ingressIP(c.service(t, "web")), "192.0.2.") })
	s := c.service(t, "web")
	if len(s.Finalizers) == 0 {
		t.Error("no load-balancer cleanup finalizer")
	}
	metal := r.ByName["metal"].LB

	s.Annotations[string(annotation.LoadBalancerBackend)] = "other"
	if _, err := c.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the address from the other backend", func() bool { return ingressIP(c.service(t, "web")) == "198.51.100.7" })
	// Bare metal keeps an address reserved while a status shows it, so it
	// lets go once its informer has seen the new status.
	eventually(t, "bare metal to hold nothing for the moved Service", func() bool {
		_, exists, err := metal.GetLoadBalancer(context.Background(), cluster, s)
		return err == nil && !exists
	})

	c.markDeleted(t, "web")
	eventually(t, "the Service deleted", func() bool { return c.serviceGone(t, "web") })
	if other.heldCount() != 0 {
		t.Error("the other backend still holds a load balancer after delete")
	}
}

// TestRestartHandsOutNoDuplicate assigns 100 Services, then starts a new
// router and controller over the same API state (a CCM restart) and adds
// more Services: every address stays unique.
func TestRestartHandsOutNoDuplicate(t *testing.T) {
	var objs []runtimeObject
	for i := range 100 {
		objs = append(objs, newService(fmt.Sprintf("svc-%03d", i), withLBBackend("metal")))
	}
	c := startCluster(t, metalRouter(t, "error"), objs...)
	stop := runServiceController(t, c)
	eventually(t, "100 addresses", func() bool { return countAssigned(t, c) == 100 })
	stop()

	// The restart: a fresh router and backend, the same API server.
	r2 := metalRouter(t, "error")
	c2 := &fakeCluster{client: c.client, router: r2, factory: informers.NewSharedInformerFactory(c.client, 0)}
	r2.Initialize(clientBuilder{c.client}, make(chan struct{}))
	r2.SetInformers(c2.factory)
	for i := range 20 {
		if _, err := c.client.CoreV1().Services("default").Create(context.Background(), newService(fmt.Sprintf("new-%02d", i), withLBBackend("metal")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	runServiceController(t, c2)
	eventually(t, "120 addresses", func() bool { return countAssigned(t, c2) == 120 })
	seen := map[string]string{}
	list, _ := c.client.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
	for _, s := range list.Items {
		ip := ingressIP(&s)
		if prev, dup := seen[ip]; dup {
			t.Errorf("address %s given to both %s and %s", ip, prev, s.Name)
		}
		seen[ip] = s.Name
	}
}

func countAssigned(t *testing.T, c *fakeCluster) int {
	list, err := c.client.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if ingressIP(&list.Items[i]) != "" {
			n++
		}
	}
	return n
}

// counted is an upstream fake cloud that counts InstanceExists calls safely.
type counted struct {
	*upstreamfake.Cloud
	n atomic.Int64
}

func (c *counted) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

func (c *counted) InstanceExists(ctx context.Context, n *corev1.Node) (bool, error) {
	c.n.Add(1)
	return c.Cloud.InstanceExists(ctx, n)
}

// TestNodeAddressChangeRetargetsLoadBalancer drives the upstream service
// controller: a node whose addresses arrive after the Service's load
// balancer was ensured (the node controller writes the providerID first and
// the addresses second; a node created with its providerID gets them later)
// reaches the backend with its address. Upstream alone never re-syncs on an
// address change, so without the router's re-sync this times out.
func TestNodeAddressChangeRetargetsLoadBalancer(t *testing.T) {
	r, other := metalAndOther(t)
	c, svc := ensuredService(t, r, "shop", "other", "198.51.100.7")
	node := c.createNode(t, newNode("ec2-1", withProviderID("aws:///eu-west-1a/i-1")))
	// An excluded node of the same backend: its address changes must not
	// hand it over.
	excluded := c.createNode(t, newNode("ec2-2", withProviderID("aws:///eu-west-1a/i-2"), withLabel(corev1.LabelNodeExcludeBalancers, "true")))
	eventually(t, "the new node handed over, without an address yet", func() bool { return other.targetsOf(svc) == "ec2-1=" })

	c.setInternalIP(t, excluded, "10.0.100.12")
	node = c.setInternalIP(t, node, "10.0.100.11")
	eventually(t, "the node's address handed over", func() bool { return other.targetsOf(svc) == "ec2-1=10.0.100.11" })
	c.setInternalIP(t, node, "10.0.100.21")
	eventually(t, "the node's new address handed over", func() bool { return other.targetsOf(svc) == "ec2-1=10.0.100.21" })
}

// ensuredService starts the upstream service controller over r with one
// Service for backend, and waits until the Service has the address ip.
func ensuredService(t *testing.T, r *Router, name, backend, ip string) (*fakeCluster, *corev1.Service) {
	t.Helper()
	svc := newService(name, withLBBackend(backend))
	c := startCluster(t, r, svc)
	runServiceController(t, c)
	eventually(t, "the Service's address", func() bool { return ingressIP(c.service(t, name)) == ip })
	return c, svc
}

func (c *fakeCluster) createNode(t *testing.T, n *corev1.Node) *corev1.Node {
	t.Helper()
	n, err := c.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// setInternalIP makes ip the node's only address; "" removes them all.
func (c *fakeCluster) setInternalIP(t *testing.T, n *corev1.Node, ip string) *corev1.Node {
	t.Helper()
	n.Status.Addresses = nil
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	}
	n, err := c.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEnsuredIn covers which Services the address re-sync may touch: only
// those the router ensured where they still want to be, not being deleted,
// and not handed to another controller.
func TestEnsuredIn(t *testing.T) {
	r, _ := metalAndOther(t)
	withIngress := func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
	}
	ensured := newService("ensured", withLBBackend("other"), withIngress)
	r.st.Remember(ensured.UID, []string{"other"})
	now := metav1.Now()
	class := "example.com/lb"
	cases := []struct {
		name string
		svc  *corev1.Service
		want string
	}{
		{"ensured here", ensured, "other"},
		{"never ensured by this router", newService("new", withLBBackend("other"), withIngress), ""},
		{"no address yet", func() *corev1.Service {
			s := newService("noaddr", withLBBackend("other"))
			r.st.Remember(s.UID, []string{"other"})
			return s
		}(), ""},
		{"being deleted", func() *corev1.Service {
			s := ensured.DeepCopy()
			s.DeletionTimestamp = &now
			return s
		}(), ""},
		{"annotation moved elsewhere", func() *corev1.Service {
			s := ensured.DeepCopy()
			s.Annotations[string(annotation.LoadBalancerBackend)] = "metal"
			return s
		}(), ""},
		{"unknown backend", func() *corev1.Service {
			s := ensured.DeepCopy()
			s.Annotations[string(annotation.LoadBalancerBackend)] = "nope"
			return s
		}(), ""},
		{"another controller's class", func() *corev1.Service {
			s := ensured.DeepCopy()
			s.Spec.LoadBalancerClass = &class
			return s
		}(), ""},
		{"no longer a LoadBalancer", func() *corev1.Service {
			s := ensured.DeepCopy()
			s.Spec.Type = corev1.ServiceTypeClusterIP
			return s
		}(), ""},
	}
	for _, tc := range cases {
		got := ""
		if bs := r.lb.EnsuredIn(tc.svc); len(bs) > 0 {
			got = strings.Join(backend.Names(bs), ",")
		}
		if got != tc.want {
			t.Errorf("%s: ensuredIn = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestStableNode mirrors upstream's node predicates for load balancers.
func TestStableNode(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"plain", newNode("a"), true},
		{"exclude label false", newNode("b", withLabel(corev1.LabelNodeExcludeBalancers, "false")), true},
		{"exclude label true", newNode("c", withLabel(corev1.LabelNodeExcludeBalancers, "true")), false},
		{"exclude label unparsable", newNode("d", withLabel(corev1.LabelNodeExcludeBalancers, "yes please")), false},
		{"being deleted", newNode("e", func(n *corev1.Node) { n.DeletionTimestamp = &now }), false},
		{"autoscaler deleting it", newNode("f", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: process.ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
		}), false},
	}
	for _, tc := range cases {
		if got := process.StableNode(tc.node); got != tc.want {
			t.Errorf("%s: stableNode = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// ipTargetCloud is an lbCloud that, like the AWS and OpenStack backends,
// targets any node with an InternalIP.
type ipTargetCloud struct{ *lbCloud }

func (c ipTargetCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c ipTargetCloud) CanTarget(_ *corev1.Service, n *corev1.Node) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return true
		}
	}
	return false
}

// TestNodeAddressLossLeavesTargets: for a backend that targets nodes by IP,
// a node gets in when its address arrives and leaves when it loses it; the
// latter is decided on the node as it was, since it is no longer targetable.
func TestNodeAddressLossLeavesTargets(t *testing.T) {
	ipt := ipTargetCloud{newLBCloud("ipt", "198.51.100.9")}
	r := metalRouter(t, "error", Backend{Name: "ipt", Type: "openstack", Scheme: "openstack", Cloud: ipt})
	c, svc := ensuredService(t, r, "db", "ipt", "198.51.100.9")
	node := c.setInternalIP(t, c.createNode(t, newNode("bm-1", withProviderID("baremetal://bm-1"))), "10.0.0.11")
	eventually(t, "the bare-metal node targeted by IP", func() bool { return ipt.targetsOf(svc) == "bm-1=10.0.0.11" })
	c.setInternalIP(t, node, "")
	eventually(t, "the node without an address no longer targeted", func() bool { return ipt.targetsOf(svc) == "" })
}
