package vsphere

import (
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	metricstestutil "k8s.io/component-base/metrics/testutil"
)

// counterSum reads a counter on the legacy registry (what /metrics serves),
// summed over the series whose labels include match.
func counterSum(t testing.TB, name string, match map[string]string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if metricstestutil.LabelsMatch(m, match) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// logins is multicloud_ccm_vsphere_logins_total{result="success"} of v.
func logins(t testing.TB, v *vcenter) float64 {
	return counterSum(t, "multicloud_ccm_vsphere_logins_total", map[string]string{"backend": v.backend, "vcenter": v.name, "result": "success"})
}

// refreshes is how many inventory retrievals of v ended, from
// multicloud_ccm_snapshot_lists_total (success and error).
func refreshes(t testing.TB, v *vcenter) float64 {
	return counterSum(t, "multicloud_ccm_snapshot_lists_total", map[string]string{"backend": v.backend, "source": v.name, "result": "success"}) +
		counterSum(t, "multicloud_ccm_snapshot_lists_total", map[string]string{"backend": v.backend, "source": v.name, "result": "error"})
}
