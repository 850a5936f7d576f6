package router

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	cloudprovider "k8s.io/cloud-provider"
)

// errorClass is the kind of a failed backend call, as the errors metric
// shows it.
type errorClass int

const (
	classThrottled errorClass = iota
	classAuth
	classNotFound
	classOther
	numErrorClasses
)

var errorClassNames = [numErrorClasses]string{"throttled", "auth", "not_found", "other"}

func (c errorClass) String() string { return errorClassNames[c] }

// The router imports no cloud SDK: it recognises the SDKs' errors by the
// methods they have. aws-sdk-go-v2's API errors (smithy.APIError) have
// ErrorCode; its HTTP errors (smithyhttp.ResponseError) HTTPStatusCode;
// gophercloud's (ErrUnexpectedResponseCode, Keystone's refusals included)
// GetStatusCode; govmomi's (SOAP faults, VIM faults, task errors) Fault,
// whose result is the vSphere fault (see vimfault.go).
type (
	errorCoder  interface{ ErrorCode() string }
	httpStatusA interface{ HTTPStatusCode() int }
	httpStatusB interface{ GetStatusCode() int }
)

// AWS error codes of throttling and of refused credentials (the EC2 and
// ELBv2 API references, STS's included).
var (
	throttleCodes = []string{"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException", "RequestThrottled", "SlowDown"}
	authCodes     = []string{"AuthFailure", "UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidAccessKeyId", "UnrecognizedClientException"}
)

// classify tells what kind of failure err is: the cloud throttled the call,
// refused the credentials, or did not find the thing asked for; anything
// else (an outage, a timeout, a user error, a wait) is other.
func classify(err error) errorClass {
	if errors.Is(err, cloudprovider.InstanceNotFound) {
		return classNotFound
	}
	var coder errorCoder
	if errors.As(err, &coder) {
		if c, ok := classOfCode(coder.ErrorCode()); ok {
			return c
		}
	}
	if c, ok := classOfFault(vimFaultName(err)); ok {
		return c
	}
	if status, ok := httpStatus(err); ok {
		return classOfStatus(status)
	}
	return classOther
}

func classOfCode(code string) (errorClass, bool) {
	switch {
	case code == "":
		return classOther, false
	case slices.Contains(throttleCodes, code):
		return classThrottled, true
	case slices.Contains(authCodes, code):
		return classAuth, true
	case strings.HasSuffix(code, "NotFound") || strings.HasSuffix(code, "NotFoundException") || strings.HasSuffix(code, ".NotFound"):
		return classNotFound, true
	}
	return classOther, false
}

func httpStatus(err error) (int, bool) {
	var a httpStatusA
	if errors.As(err, &a) {
		return a.HTTPStatusCode(), true
	}
	var b httpStatusB
	if errors.As(err, &b) {
		return b.GetStatusCode(), true
	}
	return 0, false
}

func classOfStatus(status int) errorClass {
	switch status {
	case http.StatusTooManyRequests:
		return classThrottled
	case http.StatusUnauthorized, http.StatusForbidden:
		return classAuth
	case http.StatusNotFound:
		return classNotFound
	}
	return classOther
}
