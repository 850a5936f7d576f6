package openstack_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

const (
	serverA    = "0b9e3f4a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
	serverB    = "1c0f4a5b-2d3e-4f60-9bac-1d2e3f4a5b6c"
	serverGone = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
)

// switchProxy forwards to a real service until it is switched down; then it
// answers 503, as a service in an outage behind its load balancer does.
type switchProxy struct {
	down  atomic.Bool
	calls atomic.Int64
	url   string
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		if p.down.Load() {
			http.Error(w, `{"message": "Service Unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// cloudConfig has a bare-metal backend and an OpenStack backend logging in
// through the Keystone proxy, with Octavia behind its proxy and Nova on the
// fake.
const cloudConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: %s
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: bm-1
      addresses: [{type: InternalIP, address: 10.0.0.41}]
    addressPools:
    - name: public
      addresses: ["192.0.2.0/24"]
      autoAssign: true
- name: os
  type: openstack
  openstack:
    auth: {authURL: %s/v3, username: %s, password: {file: %s}, projectName: %s}
    region: %s
    endpoints: {compute: %s, loadBalancer: %s}
    instances: {cacheTTLSeconds: 1}
    loadBalancer: {vipSubnetID: %s}
`

type cluster struct {
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	router  *router.Router
}

type builder struct{ client clientset.Interface }

func (b builder) Config(string) (*restclient.Config, error)  { return &restclient.Config{}, nil }
func (b builder) ConfigOrDie(string) *restclient.Config      { return &restclient.Config{} }
func (b builder) Client(string) (clientset.Interface, error) { return b.client, nil }
func (b builder) ClientOrDie(string) clientset.Interface     { return b.client }

func node(name, providerID string, ready bool, uninitialised bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now()}}
	if uninitialised {
		n.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	return n
}

func service(name, backend string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Annotations: map[string]string{string(annotation.LoadBalancerBackend): backend}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}},
	}
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

func (c *cluster) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := c.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (c *cluster) service(t *testing.T, name string) *corev1.Service {
	t.Helper()
	s, err := c.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ingress(s *corev1.Service) string {
	if len(s.Status.LoadBalancer.Ingress) == 0 {
		return ""
	}
	return s.Status.LoadBalancer.Ingress[0].IP
}

func tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}

// octaviaLBs counts the load balancers named name on the real Octavia,
// bypassing the proxy.
func octaviaLBs(t *testing.T, s *openstack.Settings, name string) int {
	t.Helper()
	ctx := context.Background()
	pages, err := loadbalancers.List(octaviaClient(t, s), loadbalancers.ListOpts{Name: name}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil {
		t.Fatal(err)
	}
	return len(found)
}

// env is a router over a bare-metal backend and the OpenStack backend (real
// Keystone and Octavia behind switchable proxies, Nova on the testhelper
// mux), with a fake API server holding objs.
type env struct {
	*cluster
	settings  *openstack.Settings
	keystone  *switchProxy
	octavia   *switchProxy
	nova      *openstack.FakeOpenStack
	clusterID string
	ctx       context.Context
}

func newEnv(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	s := openstack.RealOctavia(t)
	e := &env{settings: s, keystone: newSwitchProxy(t, strings.TrimSuffix(s.Auth.AuthURL, "/v3")), octavia: newSwitchProxy(t, os.Getenv("OCTAVIA_ENDPOINT"))}
	e.nova = openstack.NewFakeOpenStack(t)
	e.nova.AnyToken = true
	e.nova.AddServer(openstack.FakeNovaServer{ID: serverA, Name: "vm-a", Zone: "az-1", Flavor: "m1.large", Addresses: map[string][]string{"private": {"10.0.0.11"}}})
	e.nova.AddServer(openstack.FakeNovaServer{ID: serverB, Name: "vm-b", Zone: "az-2", Flavor: "m1.small", Addresses: map[string][]string{"private": {"10.0.0.12"}}})
	e.clusterID = fmt.Sprintf("ctl%d", time.Now().UnixNano()%1_000_000)
	cfg, err := config.Parse(fmt.Appendf(nil, cloudConfig, e.clusterID, e.keystone.url, s.Auth.Username, s.Auth.Password.File, s.Auth.ProjectName, s.Region,
		e.nova.ComputeURL(), e.octavia.url, openstack.VIPSubnetForTests), "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.NewFromConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.cluster = &cluster{client: fake.NewClientset(objs...), router: r}
	e.factory = informers.NewSharedInformerFactory(e.client, 0)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.ctx = ctx
	r.Initialize(builder{e.client}, ctx.Done())
	r.SetInformers(e.factory)
	return e
}

func (e *env) start() {
	e.factory.Start(e.ctx.Done())
	e.factory.WaitForCacheSync(e.ctx.Done())
}

// TestNodeControllersThroughOutage drives the upstream cloud-node and
// node-lifecycle controllers over the router while Keystone and Nova are
// down: no Node is deleted and the node without providerID stays
// uninitialised. Once they are back, the gone server's Node (Nova's 404) is
// deleted, the other stays, and the unnamed node is initialised by its
// exact server name.
func TestNodeControllersThroughOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t,
		node("vm-a", "openstack:///"+serverA, false, false),
		node("gone", "openstack:///"+serverGone, false, false),
		node("vm-b", "", true, true),
		node("bm-1", "baremetal://bm-1", false, false),
	)
	e.keystone.down.Store(true)
	e.nova.Fail(http.StatusServiceUnavailable)
	nodes := e.factory.Core().V1().Nodes()
	lifecycle, err := nodelifecycle.NewCloudNodeLifecycleController(nodes, e.client, e.router, 200*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	nodeCtrl, err := nodecontroller.NewCloudNodeController(nodes, e.client, e.router, time.Second, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	metrics := controllersmetrics.NewControllerManagerMetrics("test")
	go lifecycle.Run(e.ctx, metrics)
	go nodeCtrl.RunWithContext(e.ctx, metrics)

	eventually(t, 20*time.Second, "several lifecycle rounds against the down Keystone", func() bool { return e.keystone.calls.Load() >= 10 })
	for _, name := range []string{"vm-a", "gone", "vm-b", "bm-1"} {
		if e.node(t, name) == nil {
			t.Fatalf("node %s deleted during the OpenStack outage", name)
		}
	}
	if n := e.node(t, "vm-b"); !tainted(n) || n.Spec.ProviderID != "" {
		t.Errorf("vm-b initialised during the outage: providerID %q", n.Spec.ProviderID)
	}

	e.keystone.down.Store(false)
	e.nova.Fail(0)
	eventually(t, 20*time.Second, "the gone server's Node deleted", func() bool { return e.node(t, "gone") == nil })
	eventually(t, 30*time.Second, "vm-b initialised by name", func() bool { return !tainted(e.node(t, "vm-b")) })
	if n := e.node(t, "vm-b"); n.Spec.ProviderID != "openstack:///"+serverB || n.Labels[corev1.LabelInstanceTypeStable] != "m1.small" || n.Labels[corev1.LabelTopologyZone] != "az-2" {
		t.Errorf("vm-b: providerID %q labels %v", n.Spec.ProviderID, n.Labels)
	}
	for _, name := range []string{"vm-a", "bm-1"} {
		if e.node(t, name) == nil {
			t.Errorf("node %s deleted, its machine exists", name)
		}
	}
}

// TestServiceControllerThroughOctaviaOutage drives the upstream service
// controller over the router: while Octavia is down the bare-metal
// Service still gets its address and the OpenStack one waits; once Octavia
// is back it gets its VIP. Deleted while Octavia is down, the Service keeps
// its finalizer and its load balancer until Octavia answers again; then
// both are gone.
//
// Not parallel: upstream's service controller backs off exponentially on
// every failed sync (5 s doubling), and the outage lasts until the
// bare-metal Service is served; beside the parallel tests that takes longer,
// the backoff outgrows the wait for the VIP (seen twice: no VIP within 90
// s). Run alone, before them, it takes about 30 s.
func TestServiceControllerThroughOctaviaOutage(t *testing.T) {
	bm := node("bm-1", "baremetal://bm-1", true, false)
	bm.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.41"}}
	e := newEnv(t, bm)
	e.octavia.down.Store(true)
	e.start()
	testutil.RunServiceController(t, e.router, e.client, e.factory, "kubernetes", 2)
	// Upstream's service controller races between its node sync and its
	// service workers (serviceCache.allServices against
	// processServiceCreateOrUpdate); the Services come after the node sync
	// of start-up, and no node changes afterwards.
	time.Sleep(time.Second)
	for _, s := range []*corev1.Service{service("web-os", "os"), service("web-metal", "metal")} {
		if _, err := e.client.CoreV1().Services("default").Create(e.ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	eventually(t, 20*time.Second, "the bare-metal Service's address", func() bool { return strings.HasPrefix(ingress(e.service(t, "web-metal")), "192.0.2.") })
	eventually(t, 20*time.Second, "an attempt against the down Octavia", func() bool { return e.octavia.calls.Load() > 0 })
	if ip := ingress(e.service(t, "web-os")); ip != "" {
		t.Errorf("web-os has address %s during the Octavia outage", ip)
	}
	e.octavia.down.Store(false)
	eventually(t, 90*time.Second, "web-os's VIP", func() bool { return ingress(e.service(t, "web-os")) != "" })
	lbName := "mccm_" + e.clusterID + "_default_web-os"
	if n := octaviaLBs(t, e.settings, lbName); n != 1 {
		t.Fatalf("%d load balancers named %s, want 1", n, lbName)
	}

	e.octavia.down.Store(true)
	before := e.octavia.calls.Load()
	svc := e.service(t, "web-os")
	now := metav1.Now()
	svc.DeletionTimestamp = &now
	if _, err := e.client.CoreV1().Services("default").Update(e.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a delete attempt against the down Octavia", func() bool { return e.octavia.calls.Load() > before })
	if len(e.service(t, "web-os").Finalizers) == 0 {
		t.Fatal("finalizer removed while Octavia was down: the load balancer would leak")
	}
	if n := octaviaLBs(t, e.settings, lbName); n != 1 {
		t.Fatalf("%d load balancers during the outage, want 1", n)
	}
	e.octavia.down.Store(false)
	eventually(t, 90*time.Second, "the finalizer removed after Octavia is back", func() bool { return len(e.service(t, "web-os").Finalizers) == 0 })
	if n := octaviaLBs(t, e.settings, lbName); n != 0 {
		t.Errorf("%d load balancers left after delete, want 0", n)
	}
	if ip := ingress(e.service(t, "web-metal")); !strings.HasPrefix(ip, "192.0.2.") {
		t.Errorf("web-metal lost its address: %q", ip)
	}
}

// TestNodeLifecycleOtherRegionThroughRouter drives the upstream
// node-lifecycle controller over the router with one OpenStack backend
// serving RegionOne (Keystone and Nova on the fake): Nodes of RegionTwo (by
// providerID, or openstack:///<uuid> with the region label) and a Node with
// a malformed providerID are never deleted, and each gets its Warning event
// (NodeOutsideRegion, InvalidProviderID); the Node of a server this
// region's Nova answers 404 for is deleted.
func TestNodeLifecycleOtherRegionThroughRouter(t *testing.T) {
	t.Parallel()
	f := openstack.NewFakeOpenStack(t)
	pw := t.TempDir() + "/password"
	if err := os.WriteFile(pw, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: c1
backends:
- name: os
  type: openstack
  openstack:
    auth: {authURL: %s, username: ccm, password: {file: %s}, projectName: k8s}
    region: RegionOne
    instances: {cacheTTLSeconds: 1}
    loadBalancer: {enabled: false}
`, f.AuthURL(), pw), "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.NewFromConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	labelled := node("labelled", "openstack:///"+serverA, false, false)
	labelled.Labels[corev1.LabelTopologyRegion] = "RegionTwo"
	client := fake.NewClientset(
		node("regional", "openstack://RegionTwo/"+serverA, false, false), labelled,
		node("malformed", "openstack:///not-a-uuid", false, false),
		node("gone", "openstack:///"+serverGone, false, false),
	)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.Initialize(builder{client}, ctx.Done())
	factory := informers.NewSharedInformerFactory(client, 0)
	lifecycle, err := nodelifecycle.NewCloudNodeLifecycleController(factory.Core().V1().Nodes(), client, r, 200*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	go lifecycle.Run(ctx, controllersmetrics.NewControllerManagerMetrics("test"))

	c := &cluster{client: client}
	eventually(t, 20*time.Second, "the gone server's Node deleted", func() bool { return c.node(t, "gone") == nil })
	want := map[string]string{"regional": "NodeOutsideRegion", "labelled": "NodeOutsideRegion", "malformed": "InvalidProviderID"}
	eventually(t, 20*time.Second, "a Warning event on each kept Node", func() bool {
		events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && want[e.InvolvedObject.Name] == e.Reason {
				seen[e.InvolvedObject.Name] = true
			}
		}
		return len(seen) == len(want)
	})
	for name := range want {
		if c.node(t, name) == nil {
			t.Errorf("Node %s deleted", name)
		}
	}
	if n := f.CallCount("GET /compute/v2.1/servers/" + serverA); n != 0 {
		t.Errorf("RegionOne's Nova was asked %d times about a RegionTwo server", n)
	}
}
