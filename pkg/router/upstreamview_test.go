package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	servicehelper "k8s.io/cloud-provider/service/helpers"
)

// withFinalizerAndClass gives a Service a class and upstream's cleanup
// finalizer, as a load-balancer controller serving that class writes it.
func withFinalizerAndClass(class string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.LoadBalancerClass = &class
		s.Finalizers = append(s.Finalizers, servicehelper.LoadBalancerCleanupFinalizer)
	}
}

// TestServiceControllerLeavesClassedServicesAlone drives upstream's service
// controller, which acts on any Service being deleted with the finalizer
// service.kubernetes.io/load-balancer-cleanup, whatever its class (#24,
// "Also check"):
//   - a foreign class: nothing of ours is called, no event of ours is
//     recorded (upstream removes the finalizer: its own doing);
//   - one of our classes: upstream neither deletes the load balancer nor
//     removes the finalizer (our load-balancer controller does both), so
//     the two never clean up at once.
func TestServiceControllerLeavesClassedServicesAlone(t *testing.T) {
	other := newLBCloud("other", "198.51.100.7")
	r := mustRouter(t, testConfig(withClass("example.com/ours", "other")), lbBackend("other", "aws", other))
	foreign := newService("foreign", withFinalizerAndClass("example.com/theirs"))
	ours := newService("ours", withFinalizerAndClass("example.com/ours"))
	c := startCluster(t, r, foreign, ours)
	ensure(t, r, c.service(t, "ours")) // as our controller did
	c.markDeleted(t, "foreign")
	c.markDeleted(t, "ours")
	gets := func() int { other.mu.Lock(); defer other.mu.Unlock(); return other.gets }
	before := gets()
	runServiceController(t, c)

	eventually(t, "upstream to finish with the foreign Service", func() bool { return c.serviceGone(t, "foreign") })
	eventually(t, "upstream to try the Service of our class", func() bool {
		return slices.Contains(c.events(t, "ours"), "Warning/SyncLoadBalancerFailed")
	})
	if n := gets() - before; n != 0 {
		t.Errorf("the backend was asked %d times", n)
	}
	for _, e := range c.events(t, "foreign") {
		if strings.HasPrefix(e, "Warning/") {
			t.Errorf("event %s on the foreign Service", e)
		}
	}
	s := c.service(t, "ours")
	if !servicehelper.HasLBFinalizer(s) || !other.holds(s) {
		t.Fatalf("upstream cleaned up a Service of our class: finalizer %v, load balancer %v", s.Finalizers, other.holds(s))
	}
	// Our controller's part, done by hand: delete, then drop the finalizer.
	if err := r.EnsureLoadBalancerDeleted(context.Background(), cluster, s); err != nil {
		t.Fatal(err)
	}
	s.Finalizers = nil
	if _, err := c.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service of our class gone", func() bool { return c.serviceGone(t, "ours") })
}

// steppedDelete is a load-balancer backend whose delete converges in
// steps, as Octavia's: each EnsureLoadBalancerDeleted before the last
// makes one change and answers a RetryError.
type steppedDelete struct {
	*lbCloud
	mu      sync.Mutex
	steps   int // RetryErrors still to answer
	deletes int // EnsureLoadBalancerDeleted calls
}

func (c *steppedDelete) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *steppedDelete) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, s *corev1.Service) error {
	c.mu.Lock()
	c.deletes++
	if c.steps > 0 {
		c.steps--
		c.mu.Unlock()
		return cloudproviderapi.NewRetryError("listener deleted", 20*time.Millisecond)
	}
	c.mu.Unlock()
	return c.lbCloud.EnsureLoadBalancerDeleted(ctx, clusterName, s)
}

func (c *steppedDelete) deleteCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deletes
}

// TestServiceControllerDeleteInSteps drives upstream's service controller
// over a backend whose delete takes four calls, a RetryError after each
// of the first three (as Octavia's backend leaving a shared load
// balancer). Upstream's delete path drops a RetryError (it wraps the error
// with %v), so each step waited out its exponential backoff (5 s, 10 s,
// 20 s) with a Warning SyncLoadBalancerFailed each; in CI, under load,
// the last Service leaving a shared Octavia load balancer took over two
// minutes. The router's view calls again after the RetryAfter asked: the
// Service goes in one sync, with no Warning.
func TestServiceControllerDeleteInSteps(t *testing.T) {
	stepped := &steppedDelete{lbCloud: newLBCloud("other", "198.51.100.7"), steps: 3}
	r := mustRouter(t, testConfig(withDefault("other")), Backend{Name: "other", Type: "test", Scheme: "aws", Cloud: stepped})
	c := startCluster(t, r, newService("web"))
	runServiceController(t, c)
	eventually(t, "the load balancer", func() bool { return ingressIP(c.service(t, "web")) == "198.51.100.7" })

	c.markDeleted(t, "web")
	eventually(t, "the Service gone", func() bool { return c.serviceGone(t, "web") })
	if n := stepped.deleteCalls(); n != 4 {
		t.Errorf("EnsureLoadBalancerDeleted called %d times, want 4 (three steps, then done)", n)
	}
	if stepped.holds(newService("web")) {
		t.Error("the load balancer is still held")
	}
	for _, e := range c.failedDeletes(t, "web") {
		t.Errorf("event %s: a delete in steps is no failure", e)
	}
}

// scriptedDelete answers EnsureLoadBalancerDeleted from a function.
type scriptedDelete struct {
	cloudprovider.LoadBalancer
	calls atomic.Int32
	fn    func(call int) error
}

func (s *scriptedDelete) EnsureLoadBalancerDeleted(context.Context, string, *corev1.Service) error {
	return s.fn(int(s.calls.Add(1)))
}

// TestUpstreamDeleteWaitBounds checks what the view waits out on upstream's
// delete path: RetryErrors only (alone, joined or wrapped), within its
// bound; any other failure goes back at once, as does a RetryError past
// the bound or after the context ends.
func TestUpstreamDeleteWaitBounds(t *testing.T) {
	retry := func() error { return cloudproviderapi.NewRetryError("pool deleted", 10*time.Millisecond) }
	other := errors.New("403 Forbidden")
	cases := []struct {
		name      string
		fn        func(call int) error
		wait      time.Duration
		wantCalls int32
		wantRetry bool
		wantErr   bool
	}{
		{"steps, then done", func(n int) error {
			if n < 3 {
				return fmt.Errorf("backend os: EnsureLoadBalancerDeleted: %w", retry())
			}
			return nil
		}, time.Minute, 3, false, false},
		{"two backends stepping", func(n int) error {
			if n < 3 {
				return errors.Join(fmt.Errorf("backend a: %w", retry()), fmt.Errorf("backend b: %w", retry()))
			}
			return nil
		}, time.Minute, 3, false, false},
		{"a real failure beside a step", func(int) error { return errors.Join(retry(), other) }, time.Minute, 1, true, true},
		{"a real failure", func(int) error { return other }, time.Minute, 1, false, true},
		{"never done: back to upstream past the bound", func(int) error { return retry() }, 100 * time.Millisecond, 0, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lb := &scriptedDelete{fn: tc.fn}
			v := classAwareBalancer{lb: lb, servesCls: func(string) bool { return false }, deleteWait: tc.wait}
			err := v.EnsureLoadBalancerDeleted(context.Background(), cluster, newService("web"))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want an error: %v", err, tc.wantErr)
			}
			var re *cloudproviderapi.RetryError
			if errors.As(err, &re) != tc.wantRetry {
				t.Errorf("err %v: a RetryError %v, want %v", err, !tc.wantRetry, tc.wantRetry)
			}
			calls := lb.calls.Load()
			if tc.wantCalls > 0 && calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", calls, tc.wantCalls)
			}
			if tc.wantCalls == 0 && (calls < 2 || calls > 11) {
				t.Errorf("%d calls within a 100 ms bound of 10 ms steps, want 2-11", calls)
			}
		})
	}

	t.Run("context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		lb := &scriptedDelete{fn: func(n int) error {
			if n == 2 {
				cancel()
			}
			return retry()
		}}
		v := classAwareBalancer{lb: lb, servesCls: func(string) bool { return false }, deleteWait: time.Hour}
		var re *cloudproviderapi.RetryError
		if err := v.EnsureLoadBalancerDeleted(ctx, cluster, newService("web")); !errors.As(err, &re) {
			t.Fatalf("err %v, want the last RetryError", err)
		}
		if n := lb.calls.Load(); n != 2 {
			t.Errorf("%d calls, want 2 (none after the context ended)", n)
		}
	})
}
