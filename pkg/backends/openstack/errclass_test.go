package openstack

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestClassifyError: gophercloud's own error types (the OpenStack backend's
// full suite needs a real stack), wrapped as the backend wraps them, by
// class.
func TestClassifyError(t *testing.T) {
	status := func(s int) error {
		return fmt.Errorf("listing load balancers: %w", gophercloud.ErrUnexpectedResponseCode{Actual: s, Expected: []int{200}, Method: "GET", URL: "http://octavia/v2/lbaas/loadbalancers"})
	}
	for _, tc := range []struct {
		err  error
		want backends.ErrorClass
	}{
		{status(http.StatusTooManyRequests), backends.ClassThrottled},
		{status(http.StatusUnauthorized), backends.ClassAuth},
		{status(http.StatusForbidden), backends.ClassAuth},
		{status(http.StatusNotFound), backends.ClassNotFound},
		{status(http.StatusServiceUnavailable), backends.ClassUnavailable},
		{status(http.StatusBadRequest), backends.ClassUser},
		{status(http.StatusConflict), backends.ClassOther},
		{&gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusTooManyRequests}, backends.ClassThrottled},
		{fmt.Errorf("x: %w", gophercloud.ErrUnableToReauthenticate{ErrOriginal: errors.New("401"), ErrReauth: errors.New("refused")}), backends.ClassAuth},
		{gophercloud.ErrResourceNotFound{Name: "net", ResourceType: "network"}, backends.ClassNotFound},
		{fmt.Errorf("x: %w", &gophercloud.ErrEndpointNotFound{}), backends.ClassUnavailable},
		{&gophercloud.ErrServiceNotFound{}, backends.ClassUnavailable},
		{errors.New("connection reset"), backends.ClassOther},
	} {
		if got := ClassifyError(tc.err); got != tc.want {
			t.Errorf("ClassifyError(%v) = %s, want %s", tc.err, got, tc.want)
		}
		if got := backends.ClassifyErrorOf(Type, tc.err); got != tc.want && tc.want != backends.ClassOther {
			t.Errorf("backends.ClassifyErrorOf(openstack, %v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestClassifyErrorQuota: Octavia and Nova answer a quota met with 403, the
// status of a refused permission; the body says quota. The quota is the
// user's to raise (or their load balancers to delete), not the
// credentials': user, never auth. A 403 of the policy stays auth. Bodies
// as Octavia's QuotaException and policy refusal and Nova's quota error
// send them.
func TestClassifyErrorQuota(t *testing.T) {
	forbidden := func(body string) error {
		return fmt.Errorf("creating load balancer: %w", gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusForbidden, Expected: []int{201},
			Method: "POST", URL: "http://octavia/v2/lbaas/loadbalancers", Body: []byte(body)})
	}
	for _, tc := range []struct {
		body string
		want backends.ErrorClass
	}{
		{`{"faultcode": "Client", "faultstring": "Quota has been met for resources: Load Balancer", "debuginfo": null}`, backends.ClassUser},
		{`{"forbidden": {"code": 403, "message": "Quota exceeded for instances: Requested 1, but already used 10 of 10 instances"}}`, backends.ClassUser},
		{`{"faultcode": "Client", "faultstring": "Policy does not allow this request to be performed.", "debuginfo": null}`, backends.ClassAuth},
	} {
		if got := backends.ClassifyError(forbidden(tc.body)); got != tc.want {
			t.Errorf("403 %s: classed %s, want %s", tc.body, got, tc.want)
		}
	}
}
