package metric

import (
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

// TestDeclaredIsServed: a declared metric is on the legacy registry under
// multicloud_ccm_<subsystem>_<name>.
func TestDeclaredIsServed(t *testing.T) {
	c := CounterVec("metrictest", "calls_total", "Test calls.", "backend")
	g := GaugeVec("metrictest", "level", "Test level.", "backend")
	h := HistogramVec("metrictest", "seconds", "Test durations.", []float64{1, 2}, "backend")
	c.WithLabelValues("b").Add(2)
	g.WithLabelValues("b").Set(3)
	h.WithLabelValues("b").Observe(1.5)
	got, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, "multicloud_ccm_metrictest_calls_total", map[string]string{}, "backend")
	if err != nil || got["b"] != 2 {
		t.Errorf("calls_total = %v, %v; want b: 2", got, err)
	}
	if v, err := testutil.GetGaugeMetricValue(g.WithLabelValues("b")); err != nil || v != 3 {
		t.Errorf("level = %v, %v; want 3", v, err)
	}
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, mf := range mfs {
		found[mf.GetName()] = true
	}
	for _, n := range []string{"multicloud_ccm_metrictest_level", "multicloud_ccm_metrictest_seconds"} {
		if !found[n] {
			t.Errorf("%s is not served", n)
		}
	}
}
