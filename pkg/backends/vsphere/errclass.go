package vsphere

import (
	"errors"
	"net/http"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// vSphere faults (the vSphere Web Services API reference's fault types) by
// class: a session that expired or was never opened, refused credentials
// and a missing privilege are auth; a managed object that is gone (a VM
// deleted between the inventory and the call) is not_found; a host vCenter
// cannot reach is unavailable.
var (
	authFaults        = []types.BaseMethodFault{&types.NotAuthenticated{}, &types.InvalidLogin{}, &types.NoPermission{}}
	notFoundFaults    = []types.BaseMethodFault{&types.ManagedObjectNotFound{}}
	unavailableFaults = []types.BaseMethodFault{&types.HostNotConnected{}, &types.HostNotReachable{}}
)

// classifiedStatuses are the HTTP statuses ClassifyError classes; a vAPI
// answer of another status is left to the generic rules.
var classifiedStatuses = []int{
	http.StatusTooManyRequests, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
	http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout,
}

// ClassifyError classes the errors of govmomi (the backend's
// Registration.ClassifyError): a SOAP or VIM fault, or a task's, by its
// fault type (govmomi's fault.Is walks the chain and the faults' causes);
// an HTTP answer the SOAP client got instead of a SOAP envelope (an
// httpStatusError the session's budget attached: govmomi's own error for
// it, a url.Error around an unexported type, shows only the status line)
// and a vAPI answer (rest.IsStatusError) by its status: 429 throttled,
// 401 and 403 auth, 404 not_found, 502, 503 and 504 unavailable.
func ClassifyError(err error) backends.ErrorClass {
	switch {
	case anyFault(err, authFaults):
		return backends.ClassAuth
	case anyFault(err, notFoundFaults):
		return backends.ClassNotFound
	case anyFault(err, unavailableFaults):
		return backends.ClassUnavailable
	}
	if status := httpStatus(err); status != 0 {
		return backends.ClassOfHTTPStatus(status)
	}
	return backends.ClassOther
}

func anyFault(err error, faults []types.BaseMethodFault) bool {
	for _, f := range faults {
		if fault.Is(err, f) {
			return true
		}
	}
	return false
}

// httpStatus is the HTTP status of the SOAP or vAPI answer err reports, or
// 0.
func httpStatus(err error) int {
	var se *httpStatusError
	if errors.As(err, &se) {
		return se.Status
	}
	status := 0
	backends.ErrorChain(err, func(e error) bool {
		for _, code := range classifiedStatuses {
			if rest.IsStatusError(e, code) {
				status = code
				return true
			}
		}
		return false
	})
	return status
}

// httpStatusError is a SOAP call answered with an HTTP status other than
// 200 and 500 (500 carries a SOAP fault): govmomi's error for it is a
// url.Error around an unexported type with no status method, so the
// session's budget (soapBudget), which sees the answer's status on its
// way up, wraps the error with it.
type httpStatusError struct {
	Status int
	Err    error
}

func (e *httpStatusError) Error() string { return e.Err.Error() }

// Unwrap returns govmomi's error.
func (e *httpStatusError) Unwrap() error { return e.Err }
