// Package metric declares multicloud-ccm's metrics in one way: each is
// named multicloud_ccm_<subsystem>_<name>, is ALPHA, and is registered on
// the legacy registry, which the CCM serves at /metrics on its secure port,
// when it is declared. Backends and the router declare theirs with it
// instead of repeating the options and the registration.
package metric

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Namespace starts every metric's name.
const Namespace = "multicloud_ccm"

// CounterVec declares and registers a counter vector.
func CounterVec(subsystem, name, help string, labels ...string) *metrics.CounterVec {
	v := metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, StabilityLevel: metrics.ALPHA,
	}, labels)
	legacyregistry.MustRegister(v)
	return v
}

// GaugeVec declares and registers a gauge vector.
func GaugeVec(subsystem, name, help string, labels ...string) *metrics.GaugeVec {
	v := metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, StabilityLevel: metrics.ALPHA,
	}, labels)
	legacyregistry.MustRegister(v)
	return v
}

// HistogramVec declares and registers a histogram vector with the given
// buckets.
func HistogramVec(subsystem, name, help string, buckets []float64, labels ...string) *metrics.HistogramVec {
	v := metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: buckets, StabilityLevel: metrics.ALPHA,
	}, labels)
	legacyregistry.MustRegister(v)
	return v
}
