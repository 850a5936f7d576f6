package lbcontroller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
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
	registerMetrics sync.Once
)

func init() {
	registerMetrics.Do(func() { legacyregistry.MustRegister(driftRepairs, repairPasses) })
}

// repairPass is a drift-repair pass: the Services it still has to sync and
// the context carrying the backends' bulk snapshots, released when the
// last of them is synced.
type repairPass struct {
	ctx      context.Context
	pending  sets.Set[string]
	inflight int
	end      func()
}

// startRepairPass queues every Service the controller serves for a full
// re-ensure under one bulk snapshot per backend. A pass still running when
// the next starts is ended first.
func (c *Controller) startRepairPass(ctx context.Context) {
	c.mu.Lock()
	if c.pass != nil {
		c.pass.end()
		c.pass = nil
	}
	keys := make([]string, 0, len(c.state))
	for k := range c.state {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	pctx, end := ctx, func() {}
	if rp, ok := c.cloud.(RepairPasser); ok {
		pctx, end = rp.BeginRepairPass(ctx, c.opts.ClusterName)
	}
	repairPasses.Inc()
	klog.FromContext(ctx).V(2).Info("Starting a drift-repair pass", "services", len(keys))
	c.mu.Lock()
	c.pass = &repairPass{ctx: pctx, pending: sets.New(keys...), end: end}
	c.mu.Unlock()
	for _, k := range keys {
		c.queue.Add(k)
	}
}

// takeRepair reports whether this sync of key belongs to the repair pass,
// with the pass's context, and returns the function to call when the sync
// is done.
func (c *Controller) takeRepair(key string) (context.Context, bool, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pass
	if p == nil || !p.pending.Has(key) {
		return nil, false, func() {}
	}
	p.pending.Delete(key)
	p.inflight++
	return p.ctx, true, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		p.inflight--
		if p.inflight == 0 && p.pending.Len() == 0 && c.pass == p {
			p.end()
			c.pass = nil
		}
	}
}
