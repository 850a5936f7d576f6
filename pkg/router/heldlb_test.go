package router

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	fakecloud "k8s.io/cloud-provider/fake"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// heldType is a test-only load-balancer backend type for reload tests. A
// backend names its cloud: every backend built for the same cloud, by any
// configuration, shares that cloud's state (heldState), as backends
// rebuilt by a reload share the real cloud. Calls can be held in flight
// (hold) and made to fail.
const heldType = "heldlbtest"

type heldSettings struct {
	Cloud string `json:"cloud"`
	IP    string `json:"ip"`
	// Gen changes the backend's fingerprint, so a reload rebuilds it.
	Gen int `json:"gen,omitempty"`
}

// heldState is one fake cloud's load balancers.
type heldState struct {
	mu      sync.Mutex
	ip      string
	held    map[types.UID]bool
	targets map[types.UID][]string
	gets    int
	deletes int
	updates int
	// failUpdate and failEnsure fail those calls while set; updateFails
	// counts the failed updates.
	failUpdate, failEnsure error
	updateFails            int
	// deleteSteps is how many deletes still make one change and answer a
	// RetryError, as Octavia's backend leaving a shared load balancer;
	// stepped counts those answered.
	deleteSteps, stepped int
	// holds are the operations the next call of which is held until
	// release: it reports on entered first.
	holds   map[string]bool
	entered chan string
	release chan struct{}
	// latency is how many times a create or delete yields the processor
	// before it changes anything, as a cloud call takes time: it widens
	// the windows the race test looks into.
	latency atomic.Int64
}

// pause yields the processor latency times.
func (s *heldState) pause() {
	for range s.latency.Load() {
		runtime.Gosched()
	}
}

var (
	registerHeld sync.Once
	heldMu       sync.Mutex
	heldClouds   = map[string]*heldState{}
)

func registerHeldType() {
	registerHeld.Do(func() {
		backends.Register(backends.Registration{
			Type: heldType, Scheme: heldType,
			Parse: func(raw []byte, path *field.Path, _ string) (any, field.ErrorList) {
				s := &heldSettings{}
				return s, config.DecodeSection(raw, path, s)
			},
			New: func(_ context.Context, o backends.Options) (cloudprovider.Interface, error) {
				s := o.Settings.(*heldSettings) //nolint:forcetypeassert // the registered parser's type.
				return &heldCloud{s: heldCloudState(s.Cloud, s.IP)}, nil
			},
		})
	})
}

// heldCloudState returns the named fake cloud, made on first use.
func heldCloudState(name, ip string) *heldState {
	heldMu.Lock()
	defer heldMu.Unlock()
	s, ok := heldClouds[name]
	if !ok {
		s = &heldState{ip: ip, held: map[types.UID]bool{}, targets: map[types.UID][]string{},
			holds: map[string]bool{}, entered: make(chan string, 16), release: make(chan struct{})}
		heldClouds[name] = s
	}
	return s
}

// reset empties the cloud: a test run again (-count) starts from nothing,
// as its clouds are named after it.
func (s *heldState) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.held)
	clear(s.targets)
	clear(s.holds)
	s.gets, s.deletes, s.updates, s.updateFails = 0, 0, 0, 0
	s.deleteSteps, s.stepped = 0, 0
	s.failUpdate, s.failEnsure = nil, nil
}

// heldCloud is one backend over a fake cloud.
type heldCloud struct {
	fakecloud.Cloud
	s *heldState
}

func (c *heldCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (c *heldCloud) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return nil, false }
func (c *heldCloud) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (c *heldCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return c, true }
func (c *heldCloud) Routes() (cloudprovider.Routes, bool)                              { return nil, false }

// CanTarget: every node.
func (c *heldCloud) CanTarget(*corev1.Service, *corev1.Node) bool { return true }

// wait holds the call if op is held, reporting it first. s.mu is held on
// entry and on return.
func (s *heldState) wait(op string) {
	if !s.holds[op] {
		return
	}
	delete(s.holds, op)
	s.mu.Unlock()
	s.entered <- op
	<-s.release
	s.mu.Lock()
}

func (c *heldCloud) GetLoadBalancer(_ context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	if !s.held[svc.UID] {
		return nil, false, nil
	}
	return s.status(), true, nil
}

func (s *heldState) status() *corev1.LoadBalancerStatus {
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: s.ip}}}
}

func (c *heldCloud) EnsureLoadBalancer(_ context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	s := c.s
	s.pause()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wait("ensure")
	if s.failEnsure != nil {
		return nil, s.failEnsure
	}
	s.held[svc.UID] = true
	s.targets[svc.UID] = nodeTargets(nodes)
	return s.status(), nil
}

func (c *heldCloud) UpdateLoadBalancer(_ context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wait("update")
	if s.failUpdate != nil {
		s.updateFails++
		return s.failUpdate
	}
	if !s.held[svc.UID] {
		return fmt.Errorf("no load balancer for %s", svc.Name)
	}
	s.updates++
	s.targets[svc.UID] = nodeTargets(nodes)
	return nil
}

func (c *heldCloud) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *corev1.Service) error {
	s := c.s
	s.pause()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wait("delete")
	if s.deleteSteps > 0 {
		s.deleteSteps--
		s.stepped++
		return cloudproviderapi.NewRetryError("listener deleted", 10*time.Millisecond)
	}
	s.deletes++
	delete(s.held, svc.UID)
	delete(s.targets, svc.UID)
	return nil
}

// hold makes the next call of op wait for the test's release.
func (s *heldState) hold(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds[op] = true
}

// awaitEntered waits for a held call to arrive.
func (s *heldState) awaitEntered(t *testing.T, op string) {
	t.Helper()
	if got := <-s.entered; got != op {
		t.Fatalf("held call %s arrived, want %s", got, op)
	}
}

func (s *heldState) releaseOne() { s.release <- struct{}{} }

func (s *heldState) has(svc *corev1.Service) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[svc.UID]
}

func (s *heldState) heldUIDs() []types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []types.UID
	for uid := range s.held {
		out = append(out, uid)
	}
	return out
}

// targetsOf returns the Service's targets as sorted name=InternalIP.
func (s *heldState) targetsOf(svc *corev1.Service) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.targets[svc.UID])
	slices.Sort(out)
	return strings.Join(out, ",")
}

func (s *heldState) setFail(update, ensure error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failUpdate, s.failEnsure = update, ensure
}

func (s *heldState) count(what *int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *what
}

// heldBackend is one backend entry of a reload test's configuration.
type heldBackend struct{ name, cloud, ip string }

// heldConfig is a configuration over fake clouds; routing is the
// loadBalancer section's body ("" for none).
func heldConfig(t testing.TB, routing string, bs ...heldBackend) *config.CloudConfig {
	t.Helper()
	registerHeldType()
	var b strings.Builder
	b.WriteString("apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: test\n")
	if routing != "" {
		b.WriteString("loadBalancer: {" + routing + "}\n")
	}
	b.WriteString("backends:\n")
	for _, hb := range bs {
		fmt.Fprintf(&b, "- {name: %s, type: %s, %s: {cloud: %q, ip: %s}}\n", hb.name, heldType, heldType, hb.cloud, hb.ip)
	}
	cfg, err := config.Parse([]byte(b.String()), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// reloadCluster is a fake API server with a Reloadable initialised against
// it, as the CCM runs.
type reloadCluster struct {
	*fakeCluster
	rl *Reloadable
}

func startReloadCluster(t *testing.T, cfg *config.CloudConfig, objs ...runtimeObject) *reloadCluster {
	t.Helper()
	rl, err := NewReloadable(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &reloadCluster{fakeCluster: &fakeCluster{client: testutil.NewClientset(objs...)}, rl: rl}
	c.factory = informers.NewSharedInformerFactory(c.client, 0)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	rl.Initialize(clientBuilder{c.client}, stop)
	rl.SetInformers(c.factory)
	return c
}

// runServiceController runs upstream's service controller over the
// Reloadable until the test ends.
func (c *reloadCluster) runServiceController(t *testing.T) {
	t.Helper()
	testutil.RunServiceController(t, c.rl, c.client, c.factory, cluster, 4)
}

func (c *reloadCluster) apply(t *testing.T, cfg *config.CloudConfig) Changes {
	t.Helper()
	ch, err := c.rl.Apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

var errHeldDown = errors.New("connection refused")

// stepDeletes makes the next n deletes answer a RetryError, one step each.
func (s *heldState) stepDeletes(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteSteps = n
}
