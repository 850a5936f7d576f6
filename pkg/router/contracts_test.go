package router

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	upstreamfake "k8s.io/cloud-provider/fake"
	"k8s.io/component-base/metrics/testutil"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// probe is an instance backend that records whether each call carried a
// deadline and how many calls ran at once, holding each for a moment.
type probe struct {
	*upstreamfake.Cloud
	hold        time.Duration
	claims      bool
	noDeadline  atomic.Int64
	running     *atomic.Int64
	maxParallel *atomic.Int64
}

func newProbe(running, maxParallel *atomic.Int64, claims bool) *probe {
	return &probe{Cloud: &upstreamfake.Cloud{DisableLoadBalancers: true, DisableRoutes: true}, hold: 20 * time.Millisecond,
		claims: claims, running: running, maxParallel: maxParallel}
}

func (p *probe) InstancesV2() (cloudprovider.InstancesV2, bool) { return p, true }

func (p *probe) enter(ctx context.Context) {
	if _, ok := ctx.Deadline(); !ok {
		p.noDeadline.Add(1)
	}
	n := p.running.Add(1)
	for {
		m := p.maxParallel.Load()
		if n <= m || p.maxParallel.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(p.hold)
	p.running.Add(-1)
}

func (p *probe) InstanceExists(ctx context.Context, _ *corev1.Node) (bool, error) {
	p.enter(ctx)
	return p.claims, nil
}

func (p *probe) InstanceShutdown(ctx context.Context, _ *corev1.Node) (bool, error) {
	p.enter(ctx)
	return false, nil
}

func (p *probe) InstanceMetadata(ctx context.Context, _ *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	p.enter(ctx)
	return &cloudprovider.InstanceMetadata{ProviderID: "p0://x"}, nil
}

// TestFanOutIsBoundedAndEveryCallHasADeadline asks 20 backends about a
// node with no providerID: at most maxFanOut run at once, every call carries
// a deadline although the caller's context has none, and the one claimant
// wins.
func TestFanOutIsBoundedAndEveryCallHasADeadline(t *testing.T) {
	var running, maxParallel atomic.Int64
	var bs []Backend
	var probes []*probe
	for i := range 20 {
		p := newProbe(&running, &maxParallel, i == 13)
		probes = append(probes, p)
		bs = append(bs, Backend{Name: fmt.Sprintf("b%d", i), Scheme: fmt.Sprintf("p%d", i), Cloud: p})
	}
	r := mustRouter(t, testConfig(), bs...)
	ok, err := r.InstanceExists(context.Background(), newNode("x"))
	if err != nil || !ok {
		t.Fatalf("InstanceExists = %v, %v; want the claim of b13", ok, err)
	}
	if m := maxParallel.Load(); m > backend.MaxFanOut || m < 2 {
		t.Errorf("%d backends asked at once, want 2..%d", m, backend.MaxFanOut)
	}
	// Direct calls through the owning backend carry a deadline too.
	node := newNode("y", withProviderID("p3://y"))
	if _, err := r.InstanceShutdown(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	if _, err := r.InstanceMetadata(context.Background(), newNode("z", withProviderID("p3://z"))); err != nil {
		t.Fatal(err)
	}
	for i, p := range probes {
		if n := p.noDeadline.Load(); n > 0 {
			t.Errorf("backend b%d got %d calls without a deadline", i, n)
		}
	}
}

// hang blocks every instance call until its context ends.
type hang struct{ *upstreamfake.Cloud }

func (h *hang) InstancesV2() (cloudprovider.InstancesV2, bool) { return h, true }
func (h *hang) InstanceExists(ctx context.Context, _ *corev1.Node) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

// TestHangingBackendIsAnErrorNeverFalse: a cloud that never answers makes
// InstanceExists fail once the call's deadline passes; it never reports the
// node gone.
func TestHangingBackendIsAnErrorNeverFalse(t *testing.T) {
	r := mustRouter(t, testConfig(), Backend{Name: "slow", Scheme: "slow", Cloud: &hang{Cloud: &upstreamfake.Cloud{}}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ok, err := r.InstanceExists(ctx, newNode("n", withProviderID("slow://n")))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("InstanceExists = %v, %v; want a deadline error", ok, err)
	}
}

// TestMetricsPerBackend: every call is counted under its backend, operation
// and result, and timed.
func TestMetricsPerBackend(t *testing.T) {
	// The metrics are global: names unique to this run keep -count=N honest.
	run := metricsRuns.Add(1)
	okName, badName := fmt.Sprintf("metrics-ok-%d", run), fmt.Sprintf("metrics-bad-%d", run)
	r := mustRouter(t, testConfig(),
		Backend{Name: okName, Scheme: "mok", Cloud: instanceCloud(true, nil)},
		Backend{Name: badName, Scheme: "mbad", Cloud: instanceCloud(false, errCloudDown)})
	ctx := context.Background()
	for range 3 {
		_, _ = r.InstanceExists(ctx, newNode("a", withProviderID("mok://a")))
	}
	_, _ = r.InstanceExists(ctx, newNode("b", withProviderID("mbad://b")))

	check := func(name, op, result string, want float64) {
		t.Helper()
		got, err := testutil.GetCounterMetricValue(backend.BackendRequests.WithLabelValues(name, op, result))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("multicloud_ccm_backend_requests_total{backend=%s,operation=%s,result=%s} = %v, want %v", name, op, result, got, want)
		}
	}
	check(okName, "InstanceExists", "success", 3)
	check(okName, "InstanceExists", "error", 0)
	check(badName, "InstanceExists", "error", 1)
	n, err := testutil.GetHistogramMetricCount(backend.BackendDuration.WithLabelValues(okName, "InstanceExists"))
	if err != nil || n != 3 {
		t.Errorf("request_duration_seconds count = %v, %v; want 3", n, err)
	}
	// A second router over a backend of the same name reuses the metrics.
	mustRouter(t, testConfig(), Backend{Name: okName, Scheme: "mok", Cloud: instanceCloud(true, nil)})
}

var metricsRuns atomic.Int64

// informed records Initialize and SetInformers.
type informed struct {
	*upstreamfake.Cloud
	initialized, informed bool
}

func (i *informed) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {
	i.initialized = true
}
func (i *informed) SetInformers(informers.SharedInformerFactory) { i.informed = true }

// TestInitializeAndSetInformersReachEveryBackend.
func TestInitializeAndSetInformersReachEveryBackend(t *testing.T) {
	a := &informed{Cloud: instanceCloud(true, nil)}
	b := &informed{Cloud: &upstreamfake.Cloud{DisableInstances: true, DisableRoutes: true}}
	r := mustRouter(t, testConfig(), Backend{Name: "a", Scheme: "a", Cloud: a}, Backend{Name: "b", Cloud: b})
	client := fake.NewClientset()
	stop := make(chan struct{})
	defer close(stop)
	r.Initialize(clientBuilder{client}, stop)
	r.SetInformers(informers.NewSharedInformerFactory(client, 0))
	for name, c := range map[string]*informed{"a": a, "b": b} {
		if !c.initialized || !c.informed {
			t.Errorf("backend %s: Initialize reached %v, SetInformers reached %v", name, c.initialized, c.informed)
		}
	}
}
