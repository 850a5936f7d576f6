package baremetal

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/metric"
)

// Per-pool address metrics, named after MetalLB's
// metallb_allocator_addresses_in_use_total and
// metallb_allocator_addresses_total, which dashboards graph, with the
// backend and the IP family as labels.
var (
	addressesInUse = metric.GaugeVec("baremetal", "addresses_in_use_total",
		"Usable addresses of a bare-metal address pool that are taken (assigned, shown in a Service's status, or requested by a Service), by backend, pool and IP family.",
		"backend", "pool", "family")
	addressesTotal = metric.GaugeVec("baremetal", "addresses_total",
		"Usable addresses of a bare-metal address pool, by backend, pool and IP family (IPv6 pools saturate at 2^64-1).",
		"backend", "pool", "family")
)

var families = [2]corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}

// publish makes the allocator's pools report their metrics as the pools of
// backend. Families a pool has no address of are not reported.
func (a *allocator) publish(backend string) {
	for _, ps := range a.pools {
		for i := range ps.fams {
			fs := &ps.fams[i]
			if len(fs.ranges) == 0 {
				continue
			}
			fam := string(families[i])
			addressesTotal.WithLabelValues(backend, ps.Name, fam).Set(float64(fs.size))
			fs.inUse = addressesInUse.WithLabelValues(backend, ps.Name, fam)
			fs.inUse.Set(float64(fs.used))
		}
	}
}

// unpublish removes the metrics of pools of backend that keep is without.
func unpublish(backend string, old, keep []*poolState) {
	for _, ps := range old {
		if !hasPool(keep, ps.Name) {
			for _, f := range families {
				addressesInUse.DeleteLabelValues(backend, ps.Name, string(f))
				addressesTotal.DeleteLabelValues(backend, ps.Name, string(f))
			}
		}
	}
}

func hasPool(pools []*poolState, name string) bool {
	for _, ps := range pools {
		if ps.Name == name {
			return true
		}
	}
	return false
}
