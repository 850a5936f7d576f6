package vsphere

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestClassifyThrottledAndRefused drives the backend against vcsim behind
// a proxy answering, to every attempt, what a busy or refusing vCenter
// answers: the SOAP property collector HTTP 429 (govmomi reports it as a
// url.Error around an unexported status error with no status method), the
// vAPI tagging service 429 and 401 (govmomi's rest status error), the
// SOAP login 401. Each error the backend returns is classed by its type's
// classifier as the router's errors metric counts it: throttled, auth.
// Before the backend classed its own errors, the router called all of
// them other.
func TestClassifyThrottledAndRefused(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	s.tag(t, "k8s-zone", "zone-a", "/DC0")
	s.tag(t, "k8s-region", "region-1", "/DC0")
	node := newNode("a", withVM(vms[0]))
	for _, tc := range []struct {
		name string
		rule *throttleRule
		want backends.ErrorClass
	}{
		{"SOAP 429", &throttleRule{Status: http.StatusTooManyRequests, RetryAfter: "0", Method: "RetrievePropertiesEx"}, backends.ClassThrottled},
		{"SOAP login 401", &throttleRule{Status: http.StatusUnauthorized, Method: "Login"}, backends.ClassAuth},
		{"SOAP 503", &throttleRule{Status: http.StatusServiceUnavailable, RetryAfter: "0", Method: "RetrievePropertiesEx"}, backends.ClassUnavailable},
		{"vAPI 429", &throttleRule{Status: http.StatusTooManyRequests, RetryAfter: "0", VAPIPath: "/tagging/category"}, backends.ClassThrottled},
		{"vAPI 401", &throttleRule{Status: http.StatusUnauthorized, VAPIPath: "/cis/session"}, backends.ClassAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := &throttleRule{Status: tc.rule.Status, RetryAfter: tc.rule.RetryAfter, Method: tc.rule.Method, VAPIPath: tc.rule.VAPIPath}
			s.throttleNext(t, 1000, rule)
			c := newCloud(t, []*sim{s}, withZones())
			_, err := c.InstanceMetadata(context.Background(), node)
			if err == nil {
				t.Fatalf("InstanceMetadata with every matching request answered %d succeeded", tc.rule.Status)
			}
			if rule.Answered.Load() == 0 {
				t.Fatalf("the proxy answered nothing %d: the test proves nothing (%v)", tc.rule.Status, err)
			}
			if got := backends.ClassifyErrorOf(Type, err); got != tc.want {
				t.Errorf("class of %v = %s, want %s", err, got, tc.want)
			}
			if got := backends.ClassifyError(err); got != tc.want {
				t.Errorf("backends.ClassifyError(%v) = %s, want %s", err, got, tc.want)
			}
		})
	}
}

// TestClassifyFaults: faults as govmomi builds them (SOAP detail by value
// or by pointer, VIM faults, joined and wrapped errors), by class.
func TestClassifyFaults(t *testing.T) {
	soapFault := func(f types.AnyType) error {
		return soap.WrapSoapFault(&soap.Fault{Detail: struct {
			Fault types.AnyType `xml:",any,typeattr"` //nolint:staticcheck // soap.Fault's own Detail type: govmomi's XML decoder reads typeattr.
		}{Fault: f}})
	}
	cases := []struct {
		err  error
		want backends.ErrorClass
	}{
		{soapFault(types.NoPermission{}), backends.ClassAuth},
		{soapFault(&types.NotAuthenticated{}), backends.ClassAuth},
		{soap.WrapVimFault(&types.ManagedObjectNotFound{}), backends.ClassNotFound},
		{errors.Join(errors.New("x"), fmt.Errorf("y: %w", soap.WrapVimFault(&types.InvalidLogin{}))), backends.ClassAuth},
		{fmt.Errorf("vCenter vc1: %w", soap.WrapVimFault(&types.HostNotConnected{})), backends.ClassUnavailable},
		{soap.WrapVimFault(&types.InvalidPowerState{}), backends.ClassOther},
		{soap.WrapSoapFault(&soap.Fault{}), backends.ClassOther},
		{errors.New("NotAuthenticated"), backends.ClassOther},
		{&httpStatusError{Status: http.StatusTooManyRequests, Err: errors.New("429 Too Many Requests")}, backends.ClassThrottled},
	}
	for _, tc := range cases {
		if got := ClassifyError(tc.err); got != tc.want {
			t.Errorf("ClassifyError(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
