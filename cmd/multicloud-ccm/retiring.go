package main

import (
	"sync"
	"sync/atomic"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

var (
	configRetiringDesc = metrics.NewDesc("multicloud_ccm_config_retiring",
		"Replaced configurations (reloads) whose calls in flight have not all returned: above 0, a replaced backend's clients, and a rotated credential's old key, may still be used; at 0 none can be.",
		nil, nil, metrics.ALPHA, "")

	// retiring reports, at each scrape, router.Reloadable.Retiring of the
	// provider in use.
	retiring     = &retiringCollector{}
	retiringOnce sync.Once
)

// retiringCollector reads Retiring at scrape time: a replaced
// configuration ends when its last call returns, between two reloads.
type retiringCollector struct {
	metrics.BaseStableCollector
	rl atomic.Pointer[router.Reloadable]
}

// DescribeWithStability describes the gauge.
func (c *retiringCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- configRetiringDesc
}

// CollectWithStability reports the provider's replaced configurations
// still serving calls.
func (c *retiringCollector) CollectWithStability(ch chan<- metrics.Metric) {
	n := 0
	if rl := c.rl.Load(); rl != nil {
		n = rl.Retiring()
	}
	ch <- metrics.NewLazyConstMetric(configRetiringDesc, metrics.GaugeValue, float64(n))
}

// countRetiring makes multicloud_ccm_config_retiring report rl's.
func countRetiring(rl *router.Reloadable) {
	retiringOnce.Do(func() { legacyregistry.CustomMustRegister(retiring) })
	retiring.rl.Store(rl)
}
