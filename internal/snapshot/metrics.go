package snapshot

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	lookups = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "snapshot",
		Name:           "lookups_total",
		Help:           "Lookups in a backend's bulk-listing cache, by backend and result (hit: found; miss: not found, after a refresh if the snapshot was old enough).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"backend", "result"})

	lists = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "snapshot",
		Name:           "lists_total",
		Help:           "Bulk listings of a backend's cloud, by backend and result (success, error, or backoff: a lookup answered with a recent failure instead of listing).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"backend", "result"})

	listDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "snapshot",
		Name:           "list_duration_seconds",
		Help:           "Duration of a backend's bulk listings, by backend.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"backend"})

	registerOnce sync.Once
)

// cacheMetrics holds one backend's metric children, resolved once.
type cacheMetrics struct {
	hits, misses                  metrics.CounterMetric
	listOK, listFailed, backedOff metrics.CounterMetric
	duration                      metrics.ObserverMetric
}

func metricsFor(backend string) *cacheMetrics {
	registerOnce.Do(func() { legacyregistry.MustRegister(lookups, lists, listDuration) })
	return &cacheMetrics{
		hits:       lookups.WithLabelValues(backend, "hit"),
		misses:     lookups.WithLabelValues(backend, "miss"),
		listOK:     lists.WithLabelValues(backend, "success"),
		listFailed: lists.WithLabelValues(backend, "error"),
		backedOff:  lists.WithLabelValues(backend, "backoff"),
		duration:   listDuration.WithLabelValues(backend),
	}
}

func (m *cacheMetrics) observeList(err error, d time.Duration) {
	if err != nil {
		m.listFailed.Inc()
	} else {
		m.listOK.Inc()
	}
	m.duration.Observe(d.Seconds())
}
