package baremetal

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// ClassifyError classes the errors of the bare-metal backend's one API,
// the Kubernetes API server it patches Services through (kube-vip's
// annotations) and reads them from (the backend's Registration.
// ClassifyError): client-go's answers by their reason (429 throttled,
// 401 and 403 auth, 404 not_found, 500, 503 and 504 unavailable, 400 and
// 422 user), and the allocator waiting for the Service informer
// (errNotSeeded) as unavailable. Its own refusals (a pool exhausted, an
// address asked for that no pool holds) are UserErrors.
func ClassifyError(err error) backends.ErrorClass {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		if errors.Is(err, errNotSeeded) {
			return backends.ClassUnavailable
		}
		return backends.ClassOther
	}
	switch {
	case apierrors.IsTooManyRequests(err):
		return backends.ClassThrottled
	case apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err):
		return backends.ClassAuth
	case apierrors.IsNotFound(err):
		return backends.ClassNotFound
	case apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsInternalError(err):
		return backends.ClassUnavailable
	case apierrors.IsBadRequest(err) || apierrors.IsInvalid(err):
		return backends.ClassUser
	}
	return backends.ClassOther
}
