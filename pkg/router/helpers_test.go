package router

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// The shared builders, under the short names the tests use.
var (
	newNode        = testutil.NewNode
	withProviderID = testutil.WithProviderID
	withInternalIP = testutil.WithInternalIP
	withLabel      = testutil.WithLabel
	uninitialized  = testutil.Uninitialized
	notReady       = testutil.NotReady
	newService     = testutil.NewService
)

func withNodeBackend(name string) testutil.NodeTweak {
	return withLabel(string(annotation.NodeBackend), name)
}

func withLBBackend(name string) testutil.ServiceTweak {
	return func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = name }
}

// testConfig is a config with the routing settings the tests tweak.
func testConfig(tweaks ...func(*config.CloudConfig)) *config.CloudConfig {
	c := &config.CloudConfig{ClusterID: "test", Nodes: config.Nodes{Unmanaged: config.UnmanagedError}}
	for _, t := range tweaks {
		t(c)
	}
	return c
}

// instanceCloud is an upstream fake cloud with InstancesV2 on, reporting the
// given existence.
func instanceCloud(exists bool, err error) *fake.Cloud {
	return &fake.Cloud{EnableInstancesV2: true, ExistsByProviderID: exists, ErrByProviderID: err, DisableLoadBalancers: true, DisableRoutes: true}
}

// lbCloud is a stateful load-balancer backend over the upstream fake: it
// remembers which Services it holds a load balancer for, so tests can see
// what is left behind.
type lbCloud struct {
	*fake.Cloud
	name string
	ip   string

	mu      sync.Mutex
	held    map[types.UID]bool
	failGet error
	gets    int
	nodes   map[types.UID][]string
	// targets is, per Service, each node handed over as name=InternalIP.
	targets map[types.UID][]string
	// updates counts, per Service, the UpdateLoadBalancer calls.
	updates map[types.UID]int
}

func newLBCloud(name, ip string) *lbCloud {
	return &lbCloud{
		Cloud: &fake.Cloud{DisableInstances: true, DisableRoutes: true, ExternalIP: net.ParseIP(ip)},
		name:  name, ip: ip, held: map[types.UID]bool{}, nodes: map[types.UID][]string{},
		targets: map[types.UID][]string{}, updates: map[types.UID]int{},
	}
}

func (c *lbCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *lbCloud) GetLoadBalancer(_ context.Context, _ string, s *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gets++
	if c.failGet != nil {
		return nil, false, c.failGet
	}
	if !c.held[s.UID] {
		return nil, false, nil
	}
	return c.status(), true, nil
}

func (c *lbCloud) status() *corev1.LoadBalancerStatus {
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: c.ip}}}
}

func (c *lbCloud) EnsureLoadBalancer(_ context.Context, _ string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held[s.UID] = true
	c.nodes[s.UID] = nodeNames(nodes)
	c.targets[s.UID] = nodeTargets(nodes)
	return c.status(), nil
}

func (c *lbCloud) UpdateLoadBalancer(_ context.Context, _ string, s *corev1.Service, nodes []*corev1.Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held[s.UID] {
		return fmt.Errorf("%s: no load balancer for %s", c.name, s.Name)
	}
	c.updates[s.UID]++
	c.nodes[s.UID] = nodeNames(nodes)
	c.targets[s.UID] = nodeTargets(nodes)
	return nil
}

// updatesOf returns how many times s's load balancer was updated.
func (c *lbCloud) updatesOf(s *corev1.Service) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.updates[s.UID]
}

func (c *lbCloud) EnsureLoadBalancerDeleted(_ context.Context, _ string, s *corev1.Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failGet != nil {
		return c.failGet
	}
	delete(c.held, s.UID)
	delete(c.nodes, s.UID)
	return nil
}

func (c *lbCloud) holds(s *corev1.Service) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[s.UID]
}

func (c *lbCloud) heldCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

func (c *lbCloud) setFail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failGet = err
}

// targetsOf returns the nodes last handed over for s, as name=InternalIP,
// sorted: a load balancer's targets are a set, and the node lister hands
// them in no set order.
func (c *lbCloud) targetsOf(s *corev1.Service) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(slices.Sorted(slices.Values(c.targets[s.UID])), ",")
}

func nodeTargets(nodes []*corev1.Node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		ip := ""
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
				break
			}
		}
		out = append(out, n.Name+"="+ip)
	}
	return out
}

func nodeNames(nodes []*corev1.Node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

// mustRouter builds a router or fails the test.
func mustRouter(t testing.TB, cfg *config.CloudConfig, bs ...Backend) *Router {
	t.Helper()
	r, err := New(cfg, bs)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// clientBuilder hands out one clientset, as the upstream builder would.
type clientBuilder struct{ client clientset.Interface }

func (b clientBuilder) Config(string) (*restclient.Config, error)  { return &restclient.Config{}, nil }
func (b clientBuilder) ConfigOrDie(string) *restclient.Config      { return &restclient.Config{} }
func (b clientBuilder) Client(string) (clientset.Interface, error) { return b.client, nil }
func (b clientBuilder) ClientOrDie(string) clientset.Interface     { return b.client }
