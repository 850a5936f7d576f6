package lbcontroller

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

var (
	driftRepairs = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "load_balancer",
		Name:           "drift_repairs_total",
		Help:           "Load balancers a drift-repair pass found changed out of band and repaired, by backend.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"backend"})
	repairPasses = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "load_balancer",
		Name:           "repair_passes_total",
		Help:           "Drift-repair passes started (one every --load-balancer-resync-period).",
		StabilityLevel: metrics.ALPHA,
	})
	repairUnfinished = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "load_balancer",
		Name:           "repair_passes_unfinished_total",
		Help:           "Drift-repair passes that had not checked every Service when the next began (the next starts with those it left).",
		StabilityLevel: metrics.ALPHA,
	})
	registerMetrics sync.Once
)

func init() {
	registerMetrics.Do(func() { legacyregistry.MustRegister(driftRepairs, repairPasses, repairUnfinished) })
}

// reasonRepairUnfinished is the Warning event of a drift-repair pass that
// had not checked every Service when its period ended.
const reasonRepairUnfinished = "RepairPassUnfinished"

// repairSpread is the share of --load-balancer-resync-period over which a
// drift-repair pass spreads its Services: their reads reach the cloud
// evenly instead of in one burst that takes the whole API budget (and
// delays new Services' creation), and half the period is left for a pass
// slowed by the budget to finish before the next begins.
const repairSpread = 2

// Pass kinds, as the summary line names them.
const (
	passStart  = "start-up"
	passRepair = "drift-repair"
)

// repairPass is a pass over the Services served: the drift-repair pass
// (every --load-balancer-resync-period) or the start-up pass (once the
// caches are synced: the Services that already carry the cleanup
// finalizer, re-checked after a restart or a leader failover). It holds the
// Services it still has to sync and the context carrying the backends'
// bulk snapshots, released when the last of them is synced, and counts
// what the syncs did for its one summary line.
type repairPass struct {
	kind string
	// keys are the pass's Services in the order it queues them.
	keys     []string
	ctx      context.Context
	pending  sets.Set[string]
	inflight int
	end      func()
	started  time.Time
	total    int
	changed  int
	failed   int
}

// startRepairPass queues every Service the controller serves for a full
// re-ensure under one bulk snapshot per backend, spread over half the
// resync period. A pass still running when the next starts is ended first,
// and the next begins with the Services it had not reached, so that in a
// cluster too big for its API budget every Service is still checked in
// turn; the unfinished pass is a Warning event and a metric.
func (c *Controller) startRepairPass(ctx context.Context) {
	c.mu.Lock()
	keys := make([]string, 0, len(c.state))
	for k := range c.state {
		keys = append(keys, k)
	}
	var left []string
	if p := c.pass; p != nil && p.kind == passRepair && p.pending.Len() > 0 {
		left = p.order(keys)
	}
	c.mu.Unlock()
	sort.Strings(keys)
	if len(left) > 0 {
		c.reportUnfinished(ctx, left, len(keys))
		first := sets.New(left...)
		rest := keys[:0:0]
		for _, k := range keys {
			if !first.Has(k) {
				rest = append(rest, k)
			}
		}
		keys = append(left, rest...)
	}
	c.startPass(ctx, passRepair, keys)
}

// order returns the pass's Services not yet synced that are still served
// (in served), in the order the pass would have reached them. c.mu is held.
func (p *repairPass) order(served []string) []string {
	still := sets.New(served...)
	var left []string
	for _, k := range p.keys {
		if p.pending.Has(k) && still.Has(k) {
			left = append(left, k)
		}
	}
	return left
}

// reportUnfinished says that a drift-repair pass ran out of its period:
// a metric, and one Warning event, on the first Service it did not reach.
func (c *Controller) reportUnfinished(ctx context.Context, left []string, total int) {
	repairUnfinished.Inc()
	msg := fmt.Sprintf("the drift-repair pass checked %d of %d Services within --load-balancer-resync-period=%s; the next pass starts with the %d it did not reach. "+
		"The cloud's API budget (the backend's rateLimits) or the period is too small for this many load balancers: raise either",
		total-len(left), total, c.opts.ResyncPeriod, len(left))
	klog.FromContext(ctx).Info("Drift-repair pass unfinished", "checked", total-len(left), "services", total)
	ns, name, err := cache.SplitMetaNamespaceKey(left[0])
	if err != nil {
		return
	}
	if svc, err := c.services.Services(ns).Get(name); err == nil {
		c.event(svc, corev1.EventTypeWarning, reasonRepairUnfinished, msg)
	}
}

// startStartupPass makes the first sync of every Service the controller
// serves that already carries a cleanup finalizer (served before this
// process: by an earlier leader, or by upstream's service controller) part
// of one pass: one bulk snapshot per backend, and one summary line instead
// of one per Service. The informer's initial list has queued them already.
func (c *Controller) startStartupPass(ctx context.Context) {
	all, err := c.services.List(labels.Everything())
	if err != nil {
		return
	}
	var keys []string
	for _, svc := range all {
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && hasCleanupFinalizer(svc) && c.serves(svc) {
			keys = append(keys, keyOf(svc))
		}
	}
	c.startPass(ctx, passStart, keys)
}

// startPass makes the syncs of keys one pass and queues them.
func (c *Controller) startPass(ctx context.Context, kind string, keys []string) {
	if len(keys) == 0 {
		return
	}
	c.mu.Lock()
	if c.pass != nil {
		c.finish(ctx, c.pass)
		c.pass = nil
	}
	c.mu.Unlock()
	pctx, end := ctx, func() {}
	if rp, ok := c.cloud.(RepairPasser); ok {
		pctx, end = rp.BeginRepairPass(ctx, c.opts.ClusterName)
	}
	if kind == passRepair {
		repairPasses.Inc()
	}
	klog.FromContext(ctx).V(2).Info("Starting a pass over the load balancers", "pass", kind, "services", len(keys))
	p := &repairPass{kind: kind, keys: keys, ctx: pctx, pending: sets.New(keys...), end: end, started: time.Now(), total: len(keys)}
	c.mu.Lock()
	c.pass = p
	c.mu.Unlock()
	var spread time.Duration
	if kind == passRepair {
		spread = c.opts.ResyncPeriod / repairSpread
	}
	go c.pace(ctx, p, spread)
}

// pace queues the pass's Services evenly over spread (all at once for 0),
// skipping those synced already (an edit's sync counts for the pass) and
// stopping when another pass has begun or ctx ends.
//
// It queues the next only while the queue holds no more than the workers
// take at once (passBacklog): a pass the cloud's budget slows (at 5,000
// NLBs under AWS's read bucket a pass checks about 1,200 a period) would
// otherwise pile thousands of its Services in the queue, and a node
// change or an edit queued behind them (a Service the pass had checked
// while its nodes changed, queued again) waited for the end of the pass's
// period: in the AWS 5,000-NLB scale cells two target groups lacked the
// churn's nodes for 565 s (TestChangeNotQueuedBehindThePass).
//
// Each Service is due at its own time (the i-th at start + i*interval),
// not a tick after the one before: time waited for room in the queue is
// caught up once the queue drains (TestReview65dPassCatchesUpAfterABacklog).
func (c *Controller) pace(ctx context.Context, p *repairPass, spread time.Duration) {
	interval := spread / time.Duration(len(p.keys))
	if interval < time.Millisecond {
		interval = 0
	}
	start := time.Now()
	for i, k := range p.keys {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		for c.queue.Len() > c.passBacklog() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(passBacklogPoll):
			}
		}
		c.mu.Lock()
		current, due := c.pass == p, p.pending.Has(k)
		c.mu.Unlock()
		if !current {
			return
		}
		if due {
			c.queue.Add(k)
		}
	}
}

// passBacklogPoll is how often pace looks whether the queue has room for
// the pass's next Service.
const passBacklogPoll = 20 * time.Millisecond

// passBacklog is how many queued Services pace lets the pass's next one
// wait behind: the workers' number, so that a Service queued by a node
// change or an edit waits for at most one round of the pass's syncs.
func (c *Controller) passBacklog() int {
	return max(int(c.workers.Load()), 1)
}

// finish ends a pass and logs its one summary line. c.mu is held.
func (c *Controller) finish(ctx context.Context, p *repairPass) {
	p.end()
	klog.FromContext(ctx).Info("Checked the load balancers of the Services served", "pass", p.kind, "services", p.total,
		"changed", p.changed, "failed", p.failed, "unfinished", p.pending.Len()+p.inflight, "duration", time.Since(p.started).Round(time.Millisecond))
}

// takeRepair reports whether this sync of key belongs to the pass in
// progress, with the pass's context, and returns the function to call with
// the sync's outcome when it is done.
func (c *Controller) takeRepair(ctx context.Context, key string) (context.Context, bool, func(changed bool, err error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pass
	if p == nil || !p.pending.Has(key) {
		return nil, false, func(bool, error) {}
	}
	p.pending.Delete(key)
	p.inflight++
	return p.ctx, true, func(changed bool, err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		p.inflight--
		switch {
		case err != nil:
			p.failed++
		case changed:
			p.changed++
		}
		if p.inflight == 0 && p.pending.Len() == 0 && c.pass == p {
			c.finish(ctx, p)
			c.pass = nil
		}
	}
}
