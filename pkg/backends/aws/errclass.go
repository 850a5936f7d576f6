package aws

import (
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// throttleCodes are the AWS error codes of throttling: the SDK's own list,
// the one its retryer backs off on (retry.DefaultThrottleErrorCodes:
// Throttling, RequestLimitExceeded, ThrottlingException, ...). The errors
// metric (ClassifyError) and calls_total's throttled outcome
// (cloudapi.AWSAPIOptions, given isThrottle) both read it, so the two
// count the same answers.
var throttleCodes = retry.DefaultThrottleErrorCodes

// authCodes are the AWS error codes of refused credentials or a missing
// permission (the EC2, ELBv2 and STS API references).
var authCodes = map[string]bool{
	"AuthFailure": true, "UnauthorizedOperation": true, "AccessDenied": true, "AccessDeniedException": true,
	"InvalidClientTokenId": true, "SignatureDoesNotMatch": true, "ExpiredToken": true, "ExpiredTokenException": true,
	"InvalidAccessKeyId": true, "UnrecognizedClientException": true, "OptInRequired": true, "Blocked": true,
}

// unavailableCodes are the AWS error codes of a service that cannot serve
// now (the EC2 API reference's server errors).
var unavailableCodes = map[string]bool{
	"ServiceUnavailable": true, "Unavailable": true, "InternalError": true, "InternalFailure": true,
}

// userCodes are the AWS error codes of a request refused for what the
// Service asks (an annotation naming a subnet, certificate or security
// group AWS does not accept).
var userCodes = map[string]bool{
	"InvalidParameterValue": true, "InvalidParameterCombination": true, "ValidationError": true,
	"InvalidConfigurationRequest": true, "CertificateNotFound": true, "UnsupportedCertificate": true,
	"InvalidSubnet": true, "InvalidSecurityGroup": true, "InvalidScheme": true, "SSLPolicyNotFound": true,
}

// ClassifyError classes the errors of aws-sdk-go-v2 (the backend's
// Registration.ClassifyError): an API error by its code (throttling by
// the SDK's own list, throttleCodes), else an HTTP answer by its status
// (429 throttled, 401 and 403 auth, 404 not_found, 5xx unavailable). The
// backend's own not-found sentinel is not_found.
func ClassifyError(err error) backends.ErrorClass {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if c := classOfCode(ae.ErrorCode()); c != backends.ClassOther {
			return c
		}
	}
	if errors.Is(err, errNotFound) {
		return backends.ClassNotFound
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return backends.ClassOfHTTPStatus(re.HTTPStatusCode())
	}
	return backends.ClassOther
}

// isThrottle tells whether err is AWS's answer to a request over the
// account's rate.
func isThrottle(err error) bool {
	return err != nil && ClassifyError(err) == backends.ClassThrottled
}

func classOfCode(code string) backends.ErrorClass {
	_, throttled := throttleCodes[code]
	switch {
	case code == "":
		return backends.ClassOther
	case throttled:
		return backends.ClassThrottled
	case authCodes[code]:
		return backends.ClassAuth
	case unavailableCodes[code]:
		return backends.ClassUnavailable
	case userCodes[code]: // before not_found: CertificateNotFound names the user's certificate.
		return backends.ClassUser
	case notFoundCodes[code] || strings.HasSuffix(code, "NotFound") || strings.HasSuffix(code, "NotFoundException"):
		return backends.ClassNotFound
	}
	return backends.ClassOther
}
