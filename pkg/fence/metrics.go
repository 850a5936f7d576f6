package fence

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	refusedRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "fence",
		Name:           "refused_requests_total",
		Help:           "Writes to the API server the leader-election fence refused because this replica could not be sure it still held the lease, by HTTP method.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"method"})
	registerMetrics sync.Once
)

func init() {
	registerMetrics.Do(func() { legacyregistry.MustRegister(refusedRequests) })
}
