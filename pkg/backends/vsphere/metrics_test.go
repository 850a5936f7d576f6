package vsphere

import (
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// logins is multicloud_ccm_vsphere_logins_total{result="success"} of v.
func logins(t testing.TB, v *vcenter) float64 {
	return testutil.CounterSum(t, "multicloud_ccm_vsphere_logins_total", map[string]string{"backend": v.backend, "vcenter": v.name, "result": "success"})
}

// refreshes is how many inventory retrievals of v ended, from
// multicloud_ccm_snapshot_lists_total (success and error).
func refreshes(t testing.TB, v *vcenter) float64 {
	return testutil.CounterSum(t, "multicloud_ccm_snapshot_lists_total", map[string]string{"backend": v.backend, "source": v.name, "result": "success"}) +
		testutil.CounterSum(t, "multicloud_ccm_snapshot_lists_total", map[string]string{"backend": v.backend, "source": v.name, "result": "error"})
}
