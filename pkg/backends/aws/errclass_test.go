package aws

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestClassifyError: aws-sdk-go-v2's errors, wrapped as the backend wraps
// them, by class.
func TestClassifyError(t *testing.T) {
	code := func(c string) error {
		return fmt.Errorf("DescribeInstances: %w", &smithy.GenericAPIError{Code: c, Message: "m"})
	}
	status := func(s int) error {
		return fmt.Errorf("operation error: %w", &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: s}}, Err: errors.New("x")})
	}
	for _, tc := range []struct {
		err  error
		want backends.ErrorClass
	}{
		{code("Throttling"), backends.ClassThrottled},
		{code("RequestLimitExceeded"), backends.ClassThrottled},
		{code("EC2ThrottledException"), backends.ClassThrottled},
		{code("AuthFailure"), backends.ClassAuth},
		{code("UnauthorizedOperation"), backends.ClassAuth},
		{code("InvalidInstanceID.NotFound"), backends.ClassNotFound},
		{code("LoadBalancerNotFound"), backends.ClassNotFound},
		{code("ServiceUnavailable"), backends.ClassUnavailable},
		{code("InvalidParameterValue"), backends.ClassUser},
		{code("CertificateNotFound"), backends.ClassUser},
		{code("DuplicateLoadBalancerName"), backends.ClassOther},
		{status(http.StatusTooManyRequests), backends.ClassThrottled},
		{status(http.StatusForbidden), backends.ClassAuth},
		{status(http.StatusServiceUnavailable), backends.ClassUnavailable},
		{status(http.StatusInternalServerError), backends.ClassOther},
		{fmt.Errorf("x: %w", errNotFound), backends.ClassNotFound},
		{errors.New("connection reset"), backends.ClassOther},
	} {
		if got := ClassifyError(tc.err); got != tc.want {
			t.Errorf("ClassifyError(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestThrottleCodesAreTheSDKs: every code the SDK's retryer backs off on
// as throttling is throttled for the errors metric and for calls_total
// (isThrottle, which cloudapi.AWSAPIOptions counts by): one list. Before,
// the router kept a narrower list of its own (EC2ThrottledException,
// PriorRequestNotComplete, BandwidthLimitExceeded, ... were other there
// and throttled in calls_total).
func TestThrottleCodesAreTheSDKs(t *testing.T) {
	if len(retry.DefaultThrottleErrorCodes) == 0 {
		t.Fatal("the SDK lists no throttling codes")
	}
	for c := range retry.DefaultThrottleErrorCodes {
		err := fmt.Errorf("x: %w", &smithy.GenericAPIError{Code: c})
		if got := backends.ClassifyErrorOf(Type, err); got != backends.ClassThrottled || !isThrottle(err) {
			t.Errorf("code %s: class %s, isThrottle %v; want throttled for both", c, got, isThrottle(err))
		}
	}
}
