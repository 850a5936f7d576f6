package vsphere

import "github.com/multicloud-ccm/multicloud-ccm/internal/metric"

// loginsTotal counts the sessions the backend opens: one at the first call,
// then one each time vCenter expired the last.
var loginsTotal = metric.CounterVec("vsphere", "logins_total",
	"Logins of a vSphere backend to a vCenter, by backend, vcenter (host[:port]) and result (success or error). More than one success per vCenter means sessions expired and were re-established.",
	"backend", "vcenter", "result")

// result is a metric's result label for err.
func result(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}
