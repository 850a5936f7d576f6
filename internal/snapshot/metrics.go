package snapshot

import (
	"time"

	"k8s.io/component-base/metrics"

	"github.com/multicloud-ccm/multicloud-ccm/internal/metric"
)

var (
	lookups = metric.CounterVec("snapshot", "lookups_total",
		"Lookups in a backend's bulk-listing cache, by backend and result (hit: found; miss: not found, after a refresh if the snapshot was old enough).",
		"backend", "result")

	lists = metric.CounterVec("snapshot", "lists_total",
		"Bulk listings of a backend's cloud, by backend, source (what was listed, where a backend lists several: a vCenter) and result (success, error, or backoff: a lookup answered with a recent failure instead of listing).",
		"backend", "source", "result")

	listDuration = metric.HistogramVec("snapshot", "list_duration_seconds",
		"Duration of a backend's bulk listings, by backend and source.",
		metrics.ExponentialBuckets(0.01, 2, 14), "backend", "source")
)

// cacheMetrics holds one backend's metric children, resolved once.
type cacheMetrics struct {
	hits, misses                  metrics.CounterMetric
	listOK, listFailed, backedOff metrics.CounterMetric
	duration                      metrics.ObserverMetric
}

func metricsFor(backend, source string) *cacheMetrics {
	return &cacheMetrics{
		hits:       lookups.WithLabelValues(backend, "hit"),
		misses:     lookups.WithLabelValues(backend, "miss"),
		listOK:     lists.WithLabelValues(backend, source, "success"),
		listFailed: lists.WithLabelValues(backend, source, "error"),
		backedOff:  lists.WithLabelValues(backend, source, "backoff"),
		duration:   listDuration.WithLabelValues(backend, source),
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
