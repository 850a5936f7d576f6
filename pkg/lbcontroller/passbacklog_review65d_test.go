package lbcontroller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/component-base/metrics/testutil"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// Review 65d: probes of the repair pass's backlog pacing (commit 2074735).
// Most drive a controller whose Run is not called: the test is the worker
// (worker65d), so that the queue's length is the test's to choose.

// bare65d builds a controller over the router of cloudConfig, with
// resync as its period, and neither its informers nor Run started.
func bare65d(t *testing.T, resync time.Duration) (*Controller, *fake65d) {
	t.Helper()
	cfg, err := config.Parse([]byte(cloudConfig), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.NewFromConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := utilt.NewClientset(utilt.NewNode("worker-0", utilt.WithProviderID("baremetal://worker-0"), utilt.WithInternalIP("10.0.0.10")))
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	r.Initialize(utilt.NewClientBuilder(client), ctx.Done())
	r.SetInformers(factory)
	c, err := New(&hookedCloud{routerCloud: r}, Options{
		Client: client, Services: factory.Core().V1().Services(), Nodes: factory.Core().V1().Nodes(),
		ClusterName: cluster, RetryMin: time.Minute, RetryMax: time.Minute, ResyncPeriod: resync,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fake65d{c: c, ctx: ctx, cancel: cancel, factory: factory, gate: make(chan struct{})}
	t.Cleanup(func() {
		cancel()
		c.queue.ShutDown()
		f.wg.Wait()
		factory.Shutdown()
	})
	return c, f
}

// fake65d is the test's worker: once open is called it takes each key
// queued, syncs it for the pass (takeRepair, without a cloud call) and
// records it.
type fake65d struct {
	c       *Controller
	ctx     context.Context
	cancel  context.CancelFunc
	factory informers.SharedInformerFactory
	gate    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	synced  []string
	// each is how long each sync takes.
	each time.Duration
}

func (f *fake65d) start() {
	f.wg.Go(func() {
		select {
		case <-f.gate:
		case <-f.ctx.Done():
			return
		}
		for {
			key, quit := f.c.queue.Get()
			if quit {
				return
			}
			_, _, done := f.c.takeRepair(f.ctx, key)
			time.Sleep(f.each)
			f.mu.Lock()
			f.synced = append(f.synced, key)
			f.mu.Unlock()
			done(false, nil)
			f.c.queue.Done(key)
		}
	})
}

// open lets the worker run (the backlog that held it is over).
func (f *fake65d) open() { close(f.gate) }

func (f *fake65d) syncs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.synced...)
}

func keys65d(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s/svc-%02d", prefix, i))
	}
	return out
}

func passOver65d(c *Controller) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pass == nil
}

// TestReview65dPassCatchesUpAfterABacklog: a drift-repair pass of 20
// Services spread over 1 s (resync period 2 s: 50 ms apart) begins while
// the queue holds more than the workers take (a node flush's syncs); the
// backlog lasts 1 s, then the worker is idle and each sync is instant.
// The Services whose time came during the backlog are due: the pass must
// be over shortly after the backlog, as before the change (its Services
// were queued on time and synced once the backlog was gone), not 1 s
// (its whole spread) later. Otherwise every backlog a pass meets (a node
// churn) is added to its duration, and a pass the budget does not slow
// is reported unfinished (RepairPassUnfinished) after a churn of half the
// period.
func TestReview65dPassCatchesUpAfterABacklog(t *testing.T) {
	c, f := bare65d(t, 2*time.Second)
	for _, k := range keys65d("flush", 3) {
		c.queue.Add(k)
	}
	f.start()
	begin := time.Now()
	c.startPass(f.ctx, passRepair, keys65d("pass", 20))
	time.Sleep(time.Second)
	f.open()
	eventually(t, "the pass over", func() error {
		if !passOver65d(c) {
			return fmt.Errorf("the pass in progress after %s; synced %v", time.Since(begin), f.syncs())
		}
		return nil
	})
	if took := time.Since(begin); took > 1500*time.Millisecond {
		t.Errorf("the pass took %s after a 1 s backlog, with a spread of 1 s and an idle worker once the backlog ended: the time the pace waited for the backlog was not caught up", took.Round(time.Millisecond))
	}
}

// TestReview65dEndedPassQueuesNothing: a start-up pass whose pace waits
// for a backlog is ended by a drift-repair pass; once the backlog drains,
// only the new pass's Services are queued, each once, and the ended
// pass's pace queues none of its own afterwards.
func TestReview65dEndedPassQueuesNothing(t *testing.T) {
	c, f := bare65d(t, 0)
	for _, k := range keys65d("flush", 3) {
		c.queue.Add(k)
	}
	f.start()
	c.startPass(f.ctx, passStart, keys65d("old", 5))
	time.Sleep(100 * time.Millisecond)
	c.startPass(f.ctx, passRepair, keys65d("new", 5))
	f.open()
	eventually(t, "the new pass over", func() error {
		if !passOver65d(c) {
			return fmt.Errorf("in progress; synced %v", f.syncs())
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond)
	got := f.syncs()
	seen := map[string]int{}
	for _, k := range got {
		seen[k]++
		if strings.HasPrefix(k, "old/") {
			t.Errorf("the ended pass's %s was queued: synced %v", k, got)
		}
	}
	for _, k := range keys65d("new", 5) {
		if seen[k] != 1 {
			t.Errorf("%s synced %d times, want 1: synced %v", k, seen[k], got)
		}
	}
	if n := c.queue.Len(); n != 0 {
		t.Errorf("%d keys queued after both passes", n)
	}
}

// TestReview65dRetriesWaitingDoNotHoldThePass: Services waiting for
// their retry (rate-limited after a failure, or told by the cloud when
// to ask again) are not in the queue's length until due: a pass must not
// wait for them (a cloud failing for many Services would otherwise stop
// every pass for the retry delay).
func TestReview65dRetriesWaitingDoNotHoldThePass(t *testing.T) {
	c, f := bare65d(t, 0)
	for _, k := range keys65d("failing", 5) {
		c.queue.AddRateLimited(k)
	}
	for _, k := range keys65d("provisioning", 5) {
		c.queue.AddAfter(k, time.Minute)
	}
	f.start()
	f.open()
	begin := time.Now()
	c.startPass(f.ctx, passStart, keys65d("pass", 10))
	eventually(t, "the pass over", func() error {
		if !passOver65d(c) {
			return fmt.Errorf("in progress after %s; synced %v; queue %d", time.Since(begin), f.syncs(), c.queue.Len())
		}
		return nil
	})
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("the pass took %s beside 10 retries not due", took)
	}
}

// TestReview65dCancelledPassStopsWaiting: the controller stops (ctx
// ends: leader lost, shutdown) while a pass waits for the backlog; when
// the backlog drains afterwards, the pass queues nothing.
func TestReview65dCancelledPassStopsWaiting(t *testing.T) {
	c, f := bare65d(t, 0)
	for _, k := range keys65d("flush", 3) {
		c.queue.Add(k)
	}
	pctx, stop := context.WithCancel(f.ctx)
	c.startPass(pctx, passStart, keys65d("pass", 5))
	time.Sleep(60 * time.Millisecond)
	stop()
	time.Sleep(60 * time.Millisecond)
	for range 3 {
		k, _ := c.queue.Get()
		c.queue.Done(k)
	}
	time.Sleep(200 * time.Millisecond)
	if n := c.queue.Len(); n != 0 {
		t.Errorf("%d of the stopped pass's Services queued after its context ended", n)
	}
}

// TestReview65dStalledPassResumedFromItsFirst: a drift-repair pass that
// met a backlog for its whole period checked none of its Services: the
// next reports "checked 0 of 6" (metric, Warning) and begins with the
// first of them, in order, and then every Service is synced once for it.
func TestReview65dStalledPassResumedFromItsFirst(t *testing.T) {
	c, f := bare65d(t, time.Hour)
	names := keys65d("default", 6)
	c.mu.Lock()
	for _, k := range names {
		s := utilt.NewService(strings.TrimPrefix(k, "default/"))
		c.state[k] = &served{svc: s}
	}
	c.mu.Unlock()
	for _, k := range keys65d("flush", 3) {
		c.queue.Add(k)
	}
	f.start()
	unfinished, _ := testutil.GetCounterMetricValue(repairUnfinished)
	c.startRepairPass(f.ctx)
	time.Sleep(100 * time.Millisecond)
	c.startRepairPass(f.ctx)
	if got, _ := testutil.GetCounterMetricValue(repairUnfinished); got != unfinished+1 {
		t.Errorf("repair_passes_unfinished_total grew by %v, want 1", got-unfinished)
	}
	c.mu.Lock()
	p := c.pass
	var order []string
	if p != nil {
		order = append(order, p.keys...)
	}
	c.mu.Unlock()
	if p == nil || strings.Join(order, ",") != strings.Join(names, ",") {
		t.Fatalf("the next pass's order %v, want %v", order, names)
	}
	f.open()
	eventually(t, "the next pass's first Service synced", func() error {
		for _, k := range f.syncs() {
			if strings.HasPrefix(k, "default/") {
				return nil
			}
		}
		return fmt.Errorf("synced %v", f.syncs())
	})
	for _, k := range f.syncs() {
		if strings.HasPrefix(k, "default/") {
			if k != names[0] {
				t.Errorf("the next pass began with %s, want %s", k, names[0])
			}
			break
		}
	}
	c.mu.Lock()
	pending := 0
	if c.pass == p {
		pending = p.pending.Len()
	}
	c.mu.Unlock()
	if pending != 5 {
		t.Errorf("%d of the next pass's Services pending after its first, want 5 (paced over half an hour)", pending)
	}
}

// TestReview65dRunStoresItsWorkers: the backlog a pass leaves is Run's
// number of workers (--concurrent-service-syncs), at least one, stored
// before the start-up pass begins (a Service of it, with the finalizer,
// is synced under it).
func TestReview65dRunStoresItsWorkers(t *testing.T) {
	for _, workers := range []int{0, 1, 5} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			c, f := bare65d(t, 0)
			svc := service("web", ptrTo(ourClass))
			svc.Finalizers = []string{servicehelper.LoadBalancerCleanupFinalizer}
			if _, err := c.client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.factory.Start(f.ctx.Done())
			f.wg.Go(func() { c.Run(f.ctx, workers) })
			want := max(workers, 1)
			eventually(t, "Run's workers stored", func() error {
				if got := c.passBacklog(); got != want {
					return fmt.Errorf("passBacklog %d, want %d", got, want)
				}
				return nil
			})
			eventually(t, "the start-up pass over", func() error {
				if !passOver65d(c) || !c.known("default/web") {
					return fmt.Errorf("start-up pass in progress or web not synced")
				}
				return nil
			})
		})
	}
}
