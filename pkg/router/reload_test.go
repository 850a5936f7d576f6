package router

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	fakecloud "k8s.io/cloud-provider/fake"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// gatedType is a test-only backend type: its instances answer with the
// token of the settings they were built from, and hold each call until the
// gate opens.
const gatedType = "gatedtest"

type gatedSettings struct {
	Token string `json:"token"`
	Fail  bool   `json:"fail,omitempty"`
}

type gatedCloud struct {
	fakecloud.Cloud
	token   string
	entered chan struct{}
	gate    chan struct{}
	stop    <-chan struct{}
}

func (c *gatedCloud) Initialize(_ cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.stop = stop
}
func (c *gatedCloud) InstancesV2() (cloudprovider.InstancesV2, bool)   { return c, true }
func (c *gatedCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }
func (c *gatedCloud) Routes() (cloudprovider.Routes, bool)             { return nil, false }

func (c *gatedCloud) InstanceExists(ctx context.Context, _ *corev1.Node) (bool, error) {
	c.entered <- struct{}{}
	select {
	case <-c.gate:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	if c.stopped() {
		return false, errors.New("called after its stop channel closed")
	}
	return c.token == "v1", nil
}

func (c *gatedCloud) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

var (
	registerGated sync.Once
	gatedMu       sync.Mutex
	gatedByToken  = map[string]*gatedCloud{}
)

func registerGatedType() {
	registerGated.Do(func() {
		backends.Register(backends.Registration{
			Type: gatedType, Scheme: gatedType,
			Parse: func(raw []byte, path *field.Path, _ string) (any, field.ErrorList) {
				s := &gatedSettings{}
				return s, config.DecodeSection(raw, path, s)
			},
			New: func(_ context.Context, o backends.Options) (cloudprovider.Interface, error) {
				s := o.Settings.(*gatedSettings) //nolint:forcetypeassert // the registered parser's type.
				if s.Fail {
					return nil, errors.New("cannot reach the cloud with these credentials")
				}
				c := &gatedCloud{token: s.Token, entered: make(chan struct{}, 8), gate: make(chan struct{})}
				gatedMu.Lock()
				gatedByToken[s.Token] = c
				gatedMu.Unlock()
				return c, nil
			},
		})
	})
}

func cloudWithToken(token string) *gatedCloud {
	gatedMu.Lock()
	defer gatedMu.Unlock()
	return gatedByToken[token]
}

const reloadHead = "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: test\nloadBalancer: {defaultBackend: metal}\nbackends:\n"

func parseReloadConfig(t *testing.T, token string, pools string) *config.CloudConfig {
	t.Helper()
	cfg, err := config.Parse([]byte(reloadHead+
		"- {name: g, type: "+gatedType+", "+gatedType+": {token: "+token+"}}\n"+
		"- {name: metal, type: baremetal, baremetal: {inventory: [{name: bm-1}], addressPools: ["+pools+"]}}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func lbIP(t *testing.T, st *corev1.LoadBalancerStatus) netip.Addr {
	t.Helper()
	if st == nil || len(st.Ingress) != 1 {
		t.Fatalf("status %+v: want one ingress", st)
	}
	return netip.MustParseAddr(st.Ingress[0].IP)
}

// TestReloadSwapsAtomically: a call in flight when a new configuration is
// applied finishes on the backend it started on, which is stopped only
// after it returned; new calls go to the rebuilt backend; the bare-metal
// allocator keeps its leases through a change of its pools; a config whose
// backend cannot be built changes nothing.
func TestReloadSwapsAtomically(t *testing.T) {
	registerGatedType()
	ctx := context.Background()
	rl, err := NewReloadable(ctx, parseReloadConfig(t, "v1", "{name: a, addresses: [192.0.2.0/30]}"))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	svcA := newService("a")
	svcB := newService("b", func(s *corev1.Service) { s.Annotations[baremetal.AddressPoolAnnotation] = "b" })
	svcC := newService("c")
	rl.Initialize(clientBuilder{client: fake.NewClientset(svcA, svcB, svcC)}, stop)
	metalLB(t, rl).Seed(nil)
	v1 := cloudWithToken("v1")
	node := newNode("n1", withProviderID(gatedType+"://n1"))

	ipA := lbIP(t, must(rl.EnsureLoadBalancer(ctx, "c", svcA, nil)))

	inflight := make(chan error, 1)
	go func() {
		exists, err := rl.InstanceExists(ctx, node)
		if err == nil && !exists {
			err = errors.New("the in-flight call answered from the new backend")
		}
		inflight <- err
	}()
	<-v1.entered

	ch, err := rl.Apply(ctx, parseReloadConfig(t, "v2", "{name: a, addresses: [192.0.2.0/30]}, {name: b, addresses: [198.51.100.0/30], autoAssign: false}"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ch.Rebuilt, ",") != "g" || strings.Join(ch.Reconfigured, ",") != "metal" {
		t.Errorf("changes %+v: want g rebuilt and metal reconfigured", ch)
	}
	v2 := cloudWithToken("v2")
	close(v2.gate)
	if exists, err := rl.InstanceExists(ctx, node); err != nil || exists {
		t.Errorf("new call = %v, %v; want the rebuilt backend's answer (false, nil)", exists, err)
	}
	if v1.stopped() {
		t.Fatal("the replaced backend was stopped while a call was in flight on it")
	}
	close(v1.gate)
	if err := <-inflight; err != nil {
		t.Errorf("in-flight call: %v", err)
	}
	waitClosed(t, v1.stop, "the replaced backend's stop channel")

	// The allocator kept A's lease: A keeps its address, the new pool
	// serves the Service that names it.
	if got := lbIP(t, must(rl.EnsureLoadBalancer(ctx, "c", svcA, nil))); got != ipA {
		t.Errorf("after the reload A got %s, want its address %s kept", got, ipA)
	}
	if got := lbIP(t, must(rl.EnsureLoadBalancer(ctx, "c", svcB, nil))); !netip.MustParsePrefix("198.51.100.0/30").Contains(got) {
		t.Errorf("B got %s, want an address of the added pool b", got)
	}

	// A backend that cannot be built: nothing changes.
	bad, err := config.Parse([]byte(reloadHead+"- {name: g, type: "+gatedType+", "+gatedType+": {token: v3, fail: true}}\n"+
		"- {name: metal, type: baremetal, baremetal: {addressPools: [{name: c, addresses: [203.0.113.0/30]}]}}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	before := rl.Current()
	if _, err := rl.Apply(ctx, bad); err == nil || !strings.Contains(err.Error(), "backend g: cannot reach the cloud") {
		t.Errorf("Apply of a config whose backend fails = %v", err)
	}
	if rl.Current() != before || v2.stopped() {
		t.Error("a failed Apply changed the configuration in use")
	}
	if got := lbIP(t, must(rl.EnsureLoadBalancer(ctx, "c", svcC, nil))); !netip.MustParsePrefix("192.0.2.0/30").Contains(got) {
		t.Errorf("after a failed Apply C got %s, want an address of pool a (the pools in use)", got)
	}
}

// TestReloadRemovedPool: an address of a removed pool stays with its
// Service until the Service is ensured again, which replaces it.
func TestReloadRemovedPool(t *testing.T) {
	registerGatedType()
	ctx := context.Background()
	rl, err := NewReloadable(ctx, parseReloadConfig(t, "r1", "{name: a, addresses: [192.0.2.0/30]}"))
	if err != nil {
		t.Fatal(err)
	}
	metalLB(t, rl).Seed(nil)
	svc := newService("a")
	ipA := lbIP(t, must(rl.EnsureLoadBalancer(ctx, "c", svc, nil)))
	if _, err := rl.Apply(ctx, parseReloadConfig(t, "r1", "{name: b, addresses: [198.51.100.0/30]}")); err != nil {
		t.Fatal(err)
	}
	st, exists, err := rl.GetLoadBalancer(ctx, "c", svc)
	if err != nil || !exists || lbIP(t, st) != ipA {
		t.Errorf("GetLoadBalancer after the pool went = %+v, %v, %v; want %s kept", st, exists, err, ipA)
	}
	if got := lbIP(t, must(rl.EnsureLoadBalancer(ctx, "c", svc, nil))); !netip.MustParsePrefix("198.51.100.0/30").Contains(got) {
		t.Errorf("Ensure after the pool went gave %s, want an address of pool b", got)
	}
}

func metalLB(t *testing.T, rl *Reloadable) *baremetal.LoadBalancer {
	t.Helper()
	lb, ok := rl.Current().ByName["metal"].LB.(*baremetal.LoadBalancer)
	if !ok {
		t.Fatal("metal has no bare-metal load balancer")
	}
	return lb
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not close", what)
	}
}
