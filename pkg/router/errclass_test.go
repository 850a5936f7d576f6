package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/gophercloud/gophercloud/v2"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/component-base/metrics/testutil"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// TestClassify uses the SDKs' own error types (the router recognises them
// by their methods, without importing the SDKs), wrapped as backends wrap
// them.
func TestClassify(t *testing.T) {
	awsErr := func(code string) error {
		return fmt.Errorf("describing instances: %w", &smithy.GenericAPIError{Code: code, Message: "m"})
	}
	awsHTTP := func(status int) error {
		return fmt.Errorf("operation error: %w", &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: errors.New("x")})
	}
	gopher := func(status int) error {
		return fmt.Errorf("listing load balancers: %w", gophercloud.ErrUnexpectedResponseCode{Actual: status, Expected: []int{200}})
	}
	cases := []struct {
		err  error
		want backend.ErrorClass
	}{
		{awsErr("Throttling"), backend.ClassThrottled},
		{awsErr("RequestLimitExceeded"), backend.ClassThrottled},
		{awsErr("AuthFailure"), backend.ClassAuth},
		{awsErr("InvalidClientTokenId"), backend.ClassAuth},
		{awsErr("UnauthorizedOperation"), backend.ClassAuth},
		{awsErr("InvalidInstanceID.NotFound"), backend.ClassNotFound},
		{awsErr("LoadBalancerNotFound"), backend.ClassNotFound},
		{awsErr("InvalidParameterValue"), backend.ClassOther},
		{awsHTTP(http.StatusTooManyRequests), backend.ClassThrottled},
		{awsHTTP(http.StatusForbidden), backend.ClassAuth},
		{awsHTTP(http.StatusInternalServerError), backend.ClassOther},
		{gopher(http.StatusUnauthorized), backend.ClassAuth},
		{gopher(http.StatusTooManyRequests), backend.ClassThrottled},
		{gopher(http.StatusNotFound), backend.ClassNotFound},
		{gopher(http.StatusConflict), backend.ClassOther},
		{fmt.Errorf("x: %w", cloudprovider.InstanceNotFound), backend.ClassNotFound},
		{context.DeadlineExceeded, backend.ClassOther},
		{backends.NewUserError("BadThing", errors.New("fix it")), backend.ClassOther},
		{api.NewRetryError("provisioning", 0), backend.ClassOther},
	}
	for _, tc := range cases {
		if got := backend.Classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestErrorsByClassMetric: each failed call counts once, under its
// operation and class, beside requests_total's error count.
func TestErrorsByClassMetric(t *testing.T) {
	name := "errclass-" + t.Name()
	cloud := instanceCloud(true, nil)
	r := mustRouter(t, testConfig(), awsB(name, cloud))
	node := newNode("n", withProviderID("aws:///us-east-1a/i-1"))
	count := func(class string) float64 {
		v, err := testutil.GetCounterMetricValue(backend.BackendErrors.WithLabelValues(name, "InstanceExists", class))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	errCount := func() float64 {
		v, _ := testutil.GetCounterMetricValue(backend.BackendRequests.WithLabelValues(name, "InstanceExists", "error"))
		return v
	}
	// The metrics are process-wide: -count=N runs this test N times.
	before := [4]float64{count("throttled"), count("auth"), count("not_found"), count("other")}
	errsBefore := errCount()
	for _, err := range []error{
		&smithy.GenericAPIError{Code: "Throttling"}, &smithy.GenericAPIError{Code: "Throttling"},
		&smithy.GenericAPIError{Code: "AuthFailure"}, errors.New("connection refused"), nil,
	} {
		cloud.ErrByProviderID = err
		_, _ = r.InstanceExists(context.Background(), node)
	}
	got := fmt.Sprint(count("throttled")-before[0], count("auth")-before[1], count("not_found")-before[2], count("other")-before[3])
	errs := errCount() - errsBefore
	if got != "2 1 0 1" || errs != 4 {
		t.Errorf("errors by class (throttled auth not_found other) = %s, requests with an error = %v; want 2 1 0 1 and 4", got, errs)
	}
}
