package backends

import (
	"errors"
	"net"
	"net/http"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// ErrorClass is the kind of a failed backend call. Each backend type
// classes its own SDK's errors (Registration.ClassifyError): the router
// imports no SDK, and counts failed calls and judges a backend's health by
// the class.
type ErrorClass int

// The classes of a failed call.
const (
	// ClassOther is anything no class below fits: a timeout, a wait for a
	// load balancer still provisioning, an error the backend does not know.
	ClassOther ErrorClass = iota
	// ClassThrottled: the cloud refused the call for the account's request
	// rate (AWS Throttling, RequestLimitExceeded; HTTP 429).
	ClassThrottled
	// ClassAuth: the cloud refused the credentials or the session, or the
	// account lacks a permission (AWS AuthFailure, UnauthorizedOperation;
	// HTTP 401 and 403; vSphere NotAuthenticated, InvalidLogin,
	// NoPermission).
	ClassAuth
	// ClassNotFound: the cloud answered that what was asked for does not
	// exist (cloudprovider.InstanceNotFound, AWS *.NotFound, HTTP 404,
	// vSphere ManagedObjectNotFound).
	ClassNotFound
	// ClassUnavailable: the cloud could not be reached or answered that it
	// cannot serve now (a refused connection, HTTP 502, 503 and 504, AWS
	// ServiceUnavailable, InternalError).
	ClassUnavailable
	// ClassUser: a problem the user fixes (a UserError: a bad annotation,
	// a VM without guest tools), and the cloud refusing a request as
	// malformed for that reason.
	ClassUser
	numClasses
)

var classNames = [numClasses]string{"other", "throttled", "auth", "not_found", "unavailable", "user"}

// String is the class's name: other, throttled, auth, not_found,
// unavailable or user.
func (c ErrorClass) String() string {
	if c < 0 || c >= numClasses {
		return "other"
	}
	return classNames[c]
}

// ErrorClasses lists every class, ClassOther first.
func ErrorClasses() []ErrorClass {
	out := make([]ErrorClass, numClasses)
	for c := range out {
		out[c] = ErrorClass(c)
	}
	return out
}

// Refused reports whether err is a call this replica refused itself
// before sending it (cloudapi.ErrMutationRefused: the leader-election
// fence's mutation gate, closed because the replica may no longer lead).
// Nothing reached the cloud: it says nothing about the cloud's health,
// and a create it refused was not made.
func Refused(err error) bool {
	return errors.Is(err, cloudapi.ErrMutationRefused)
}

// ErrorClassifier classes the errors of one backend type's SDK: it returns
// the class of the first error in err's chain (errors.Unwrap, joined
// errors included) that the SDK made and it knows, and ClassOther for an
// error of no SDK it knows. It is called for every failed call: it must
// not block, and should allocate little.
type ErrorClassifier func(err error) ErrorClass

// ClassifyError returns the class of err, an error a backend returned:
// cloudprovider.InstanceNotFound is not_found; else the first class other
// than ClassOther that a registered type's ClassifyError gives (the types'
// SDKs make errors of distinct Go types, so at most one knows it); else
// user for a UserError, unavailable for a network error (a refused
// connection, a name that does not resolve); else other. A refusal of the
// credentials wrapped as a UserError stays auth: the SDK's class comes
// first.
func ClassifyError(err error) ErrorClass {
	return classify(err, classifiers())
}

// ClassifyErrorOf is ClassifyError asking only typ's classifier (the
// other rules apply as in ClassifyError): what the conformance suite
// checks of each backend.
func ClassifyErrorOf(typ string, err error) ErrorClass {
	var cs []ErrorClassifier
	if r, ok := Lookup(typ); ok && r.ClassifyError != nil {
		cs = []ErrorClassifier{r.ClassifyError}
	}
	return classify(err, cs)
}

func classify(err error, cs []ErrorClassifier) ErrorClass {
	if err == nil {
		return ClassOther
	}
	if errors.Is(err, cloudprovider.InstanceNotFound) {
		return ClassNotFound
	}
	for _, c := range cs {
		if class := c(err); class != ClassOther {
			return class
		}
	}
	if _, ok := AsUserError(err); ok {
		return ClassUser
	}
	var netErr *net.OpError
	var dnsErr *net.DNSError
	if errors.As(err, &netErr) || errors.As(err, &dnsErr) {
		return ClassUnavailable
	}
	return ClassOther
}

// classifiers returns the registered types' classifiers, in type order.
// The list is built once per registration, not per call.
func classifiers() []ErrorClassifier {
	mu.RLock()
	defer mu.RUnlock()
	return classifierList
}

// ErrorChain calls f on err and every error it wraps, depth first,
// joined errors included, until f returns true; it reports whether f did.
// For classifiers of SDK errors that errors.As cannot find (an unexported
// type checked by a function of the SDK, such as govmomi's
// rest.IsStatusError).
func ErrorChain(err error, f func(error) bool) bool {
	for err != nil {
		if f(err) {
			return true
		}
		switch u := err.(type) { //nolint:errorlint // walking the chain by hand.
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if ErrorChain(inner, f) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return false
		}
	}
	return false
}

// ClassOfHTTPStatus is the class of a call a cloud's API answered with an
// HTTP status: 429 throttled, 401 and 403 auth, 404 not found, 502, 503
// and 504 unavailable, anything else other. A backend whose cloud means
// more by a status (a quota's 403, a request refused as malformed) checks
// that first.
func ClassOfHTTPStatus(status int) ErrorClass {
	switch status {
	case http.StatusTooManyRequests:
		return ClassThrottled
	case http.StatusUnauthorized, http.StatusForbidden:
		return ClassAuth
	case http.StatusNotFound:
		return ClassNotFound
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return ClassUnavailable
	}
	return ClassOther
}
