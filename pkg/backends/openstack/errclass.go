package openstack

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// ClassifyError classes the errors of gophercloud (the backend's
// Registration.ClassifyError): an unexpected HTTP answer by its status
// (429 throttled; 401 and 403 auth, Keystone's refusals included; 404
// not_found; 502, 503 and 504 unavailable; 400 and 413 user; a 403
// whose body says a quota is met, as Octavia's and Nova's do, user), a
// failed re-authentication as auth, a name no resource has
// (ErrResourceNotFound) as not_found, a service or endpoint missing from
// the catalog as unavailable (gophercloud returns those two as pointers,
// the others as values; a pointer to those is taken too).
func ClassifyError(err error) backends.ErrorClass {
	if e, ok := responseOf(err); ok {
		if e.Actual == http.StatusForbidden && quotaMet(e.Body) {
			return backends.ClassUser
		}
		return classOfStatus(e.Actual)
	}
	var reauth gophercloud.ErrUnableToReauthenticate
	var reauthPtr *gophercloud.ErrUnableToReauthenticate
	var missing gophercloud.ErrResourceNotFound
	var missingPtr *gophercloud.ErrResourceNotFound
	var noService *gophercloud.ErrServiceNotFound
	var noEndpoint *gophercloud.ErrEndpointNotFound
	switch {
	case errors.As(err, &reauth) || errors.As(err, &reauthPtr):
		return backends.ClassAuth
	case errors.As(err, &missing) || errors.As(err, &missingPtr):
		return backends.ClassNotFound
	case errors.As(err, &noService) || errors.As(err, &noEndpoint):
		return backends.ClassUnavailable
	}
	return backends.ClassOther
}

// responseOf is the gophercloud.ErrUnexpectedResponseCode in err's chain
// (gophercloud returns it by value; a pointer is taken too).
func responseOf(err error) (gophercloud.ErrUnexpectedResponseCode, bool) {
	var e gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &e) {
		return e, true
	}
	var p *gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &p) && p != nil {
		return *p, true
	}
	return gophercloud.ErrUnexpectedResponseCode{}, false
}

// quotaMet reports whether a 403's body is a quota refusal, not a
// permission's: Octavia's QuotaException ("Quota has been met for
// resources: ...") and Nova's ("Quota exceeded for ...") both answer 403.
func quotaMet(body []byte) bool {
	return bytes.Contains(body, []byte("Quota has been met")) || bytes.Contains(body, []byte("Quota exceeded"))
}

func classOfStatus(status int) backends.ErrorClass {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return backends.ClassUser
	}
	return backends.ClassOfHTTPStatus(status)
}
