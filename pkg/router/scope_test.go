package router

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	upstreamfake "k8s.io/cloud-provider/fake"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// listCtx is a context.Context whose dynamic type cannot be compared.
type listCtx struct {
	context.Context
	tags []string
}

func scopeBackend() *backend.Member {
	return backend.New(Backend{Name: "scoped", Scheme: "scoped", Cloud: instanceCloud(true, nil)})
}

// TestScopeServesOneParentWithinReuse: calls with the same parent starting
// within scopeReuse share one context, each with at least the timeout left;
// a later call gets a new scope, and the old one's context ends only when
// the last call holding it returns.
func TestScopeServesOneParentWithinReuse(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	leader, cancel := context.WithCancel(context.Background())
	defer cancel()
	for name, parent := range map[string]context.Context{
		"background": context.Background(), "channel": wait.ContextForChannel(stop), "cancel": leader,
	} {
		t.Run(name, func(t *testing.T) {
			b := scopeBackend()
			start := time.Now()
			first := b.Scope(parent, backend.OpInstanceExists, backend.InstanceCallTimeout, start)
			later := start.Add(backend.ScopeReuse / 2)
			second := b.Scope(parent, backend.OpInstanceExists, backend.InstanceCallTimeout, later)
			if first != second {
				t.Fatal("two calls with one parent within scopeReuse got two scopes")
			}
			d, ok := second.Ctx.Deadline()
			if !ok || d.Before(later.Add(backend.InstanceCallTimeout)) || d.After(start.Add(backend.InstanceCallTimeout+backend.ScopeReuse)) {
				t.Errorf("deadline %v after the first call's start, want %v..%v", d.Sub(start), backend.ScopeReuse/2+backend.InstanceCallTimeout, backend.InstanceCallTimeout+backend.ScopeReuse)
			}
			third := b.Scope(parent, backend.OpInstanceExists, backend.InstanceCallTimeout, start.Add(backend.ScopeReuse))
			if third == first {
				t.Fatal("a call scopeReuse after the first reused its scope")
			}
			first.Release()
			if err := first.Ctx.Err(); err != nil {
				t.Fatalf("replaced scope ended with a call still holding it: %v", err)
			}
			second.Release()
			if err := first.Ctx.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("replaced scope after its last call: Err = %v, want context.Canceled", err)
			}
			third.Release()
			if err := third.Ctx.Err(); err != nil {
				t.Errorf("current scope ended when its only call returned: %v", err)
			}
		})
	}
}

// TestScopeDeadlines: the router's deadline applies unless the parent's is
// sooner, in which case the scope keeps the parent's for as long as it is
// asked with that parent.
func TestScopeDeadlines(t *testing.T) {
	start := time.Now()
	soon, cancelSoon := context.WithDeadline(context.Background(), start.Add(time.Second))
	defer cancelSoon()
	late, cancelLate := context.WithDeadline(context.Background(), start.Add(time.Hour))
	defer cancelLate()
	for _, tc := range []struct {
		name     string
		parent   context.Context
		min, max time.Time
		shared   bool // a call 10*scopeReuse later shares the scope
	}{
		{"none", context.Background(), start.Add(backend.LoadBalancerCallTimeout), start.Add(backend.LoadBalancerCallTimeout + backend.ScopeReuse), false},
		{"parent's sooner", soon, start.Add(time.Second), start.Add(time.Second), true},
		{"parent's later", late, start.Add(backend.LoadBalancerCallTimeout), start.Add(backend.LoadBalancerCallTimeout + backend.ScopeReuse), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := scopeBackend()
			s := b.Scope(tc.parent, backend.OpEnsureLoadBalancer, backend.LoadBalancerCallTimeout, start)
			defer s.Release()
			d, ok := s.Ctx.Deadline()
			if !ok || d.Before(tc.min) || d.After(tc.max) {
				t.Errorf("deadline in %v, want %v..%v", d.Sub(start), tc.min.Sub(start), tc.max.Sub(start))
			}
			again := b.Scope(tc.parent, backend.OpEnsureLoadBalancer, backend.LoadBalancerCallTimeout, start.Add(10*backend.ScopeReuse))
			defer again.Release()
			if (again == s) != tc.shared {
				t.Errorf("a call 10*scopeReuse later shares the scope: %v, want %v", again == s, tc.shared)
			}
		})
	}
}

// TestScopeEndsWithItsParent: cancelling the caller's context ends the
// backend call's context at once.
func TestScopeEndsWithItsParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	s := scopeBackend().Scope(parent, backend.OpInstanceExists, backend.InstanceCallTimeout, time.Now())
	defer s.Release()
	cancel()
	select {
	case <-s.Ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the call's context outlived its parent's cancellation")
	}
}

// TestScopeOfAnUncomparableParent: a parent that cannot be compared gets a
// scope per call, ended when the call returns, and never becomes the
// backend's current scope.
func TestScopeOfAnUncomparableParent(t *testing.T) {
	b := scopeBackend()
	parent := listCtx{Context: context.Background(), tags: []string{"a"}}
	s := b.Scope(parent, backend.OpInstanceShutdown, backend.InstanceCallTimeout, time.Now())
	if b.Scopes[backend.OpInstanceShutdown].Load() != nil {
		t.Error("a scope over an uncomparable parent became the backend's current scope")
	}
	if s.Ctx.Err() != nil {
		t.Fatalf("the call's context ended before the call returned: %v", s.Ctx.Err())
	}
	s.Release()
	if !errors.Is(s.Ctx.Err(), context.Canceled) {
		t.Errorf("after the call: Err = %v, want context.Canceled", s.Ctx.Err())
	}
}

// wrapCtx is a comparable context type that may hold one that is not.
type wrapCtx struct{ context.Context }

// TestScopeOfAWrappedUncomparableParent: comparing two wrappers of a
// context that cannot be compared panics in Go; the router's comparison
// must not, and the second call must not share the first call's scope.
func TestScopeOfAWrappedUncomparableParent(t *testing.T) {
	b := scopeBackend()
	parent := func() context.Context { return wrapCtx{listCtx{Context: context.Background(), tags: []string{"a"}}} }
	now := time.Now()
	first := b.Scope(parent(), backend.OpInstanceExists, backend.InstanceCallTimeout, now)
	defer first.Release()
	second := b.Scope(parent(), backend.OpInstanceExists, backend.InstanceCallTimeout, now)
	defer second.Release()
	if first == second {
		t.Error("calls with uncomparable parents shared a scope")
	}
}

// TestScopeHandsOutOnlyLiveContexts: many calls at once, with two
// parents, a clock moving past scopeReuse and scopes replaced all the
// while, each see a live context until they return.
func TestScopeHandsOutOnlyLiveContexts(t *testing.T) {
	b := scopeBackend()
	parents := []context.Context{context.Background(), context.TODO()}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				now := start.Add(time.Duration(i) * backend.ScopeReuse / 100)
				s := b.Scope(parents[(g+i)%2], backend.OpInstanceExists, backend.InstanceCallTimeout, now)
				err := s.Ctx.Err()
				s.Release()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call got an ended context: %v", err)
	}
}

// loggingInstances logs one line through the logger of each call's
// context.
type loggingInstances struct{ *upstreamfake.Cloud }

func (l *loggingInstances) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }
func (l *loggingInstances) InstanceExists(ctx context.Context, _ *corev1.Node) (bool, error) {
	klog.FromContext(ctx).Info("Looked up")
	return true, nil
}
func (l *loggingInstances) InstanceShutdown(ctx context.Context, _ *corev1.Node) (bool, error) {
	klog.FromContext(ctx).Info("Looked up")
	return false, nil
}
func (l *loggingInstances) InstanceMetadata(context.Context, *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	return &cloudprovider.InstanceMetadata{}, nil
}

// TestCallLoggerNamesBackendAndOperation: the logger a backend finds in
// its context carries the caller's values, the backend and the operation,
// for each operation in turn although the calls share the caller's context.
func TestCallLoggerNamesBackendAndOperation(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{}).WithValues("controller", "cloud-node-lifecycle")
	ctx := klog.NewContext(context.Background(), logger)
	r := mustRouter(t, testConfig(), Backend{Name: "metal", Scheme: "baremetal", Cloud: &loggingInstances{Cloud: &upstreamfake.Cloud{}}})
	node := newNode("bm-1", withProviderID("baremetal://bm-1"))
	for range 2 {
		if _, err := r.InstanceExists(ctx, node); err != nil {
			t.Fatal(err)
		}
		if _, err := r.InstanceShutdown(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"InstanceExists", "InstanceShutdown", "InstanceExists", "InstanceShutdown"}
	if len(lines) != len(want) {
		t.Fatalf("logged %q, want %d lines", lines, len(want))
	}
	for i, line := range lines {
		for _, kv := range []string{`"controller"="cloud-node-lifecycle"`, `"backend"="metal"`, `"operation"="` + want[i] + `"`} {
			if !strings.Contains(line, kv) {
				t.Errorf("line %d %s lacks %s", i, line, kv)
			}
		}
	}
}
