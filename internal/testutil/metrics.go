package testutil

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"
	metricstestutil "k8s.io/component-base/metrics/testutil"
)

// CounterSum reads a counter on the legacy registry (what /metrics
// serves), summed over the series whose labels include match (nil: all).
func CounterSum(t testing.TB, name string, match map[string]string) float64 {
	t.Helper()
	return sum(t, name, match, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
}

// GaugeValue reads a gauge on the legacy registry, summed over the series
// whose labels include match (one series when match names them all).
func GaugeValue(t testing.TB, name string, match map[string]string) float64 {
	t.Helper()
	return sum(t, name, match, func(m *dto.Metric) float64 { return m.GetGauge().GetValue() })
}

// sum adds value over the series of the metric name whose labels include
// match.
func sum(t testing.TB, name string, match map[string]string, value func(*dto.Metric) float64) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if metricstestutil.LabelsMatch(m, match) {
				total += value(m)
			}
		}
	}
	return total
}
