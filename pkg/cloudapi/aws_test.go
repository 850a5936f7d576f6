package cloudapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

func elbClient(url string, b *Budget) *elbv2.Client {
	return elbv2.New(elbv2.Options{
		Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "secret", ""),
		BaseEndpoint: awssdk.String(url),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts, o.MaxBackoff, o.RateLimiter = 20, 200*time.Millisecond, ratelimit.None
		}),
		APIOptions: []func(*middleware.Stack) error{AWSAPIOptions(b, sdkThrottle)},
	})
}

// sdkThrottle is the AWS backend's rule in small: a code of the SDK's
// retryer's throttling list.
func sdkThrottle(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	_, ok := retry.DefaultThrottleErrorCodes[ae.ErrorCode()]
	return ok
}

// TestAWSBudgetStaysUnderAWSBuckets: 80 concurrent DescribeLoadBalancers
// against the fake with AWS's token buckets on (10 tokens, 20 a second).
// With a client-side budget under AWS's (5 tokens, 15 a second), AWS
// throttles none; with the budget off, AWS throttles some, the SDK's
// retryer backs them off and every call still succeeds. Both are counted.
func TestAWSBudgetStaysUnderAWSBuckets(t *testing.T) {
	fake := awsfake.New("eu-west-1")
	srv := httptest.NewServer(fake)
	defer srv.Close()
	run := func(backend string, limit RateLimit) {
		fake.SetRateLimits(&awsfake.RateLimits{ELBv2Read: awsfake.Bucket{Capacity: 10, Refill: 20}})
		c := elbClient(srv.URL, NewBudget(backend, map[string]RateLimit{APIELBv2: limit}, AWSDefaults))
		var wg sync.WaitGroup
		errs := make(chan error, 80)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					_, err := c.DescribeLoadBalancers(context.Background(), &elbv2.DescribeLoadBalancersInput{})
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("%s: a call failed: %v", backend, err)
			}
		}
	}

	// The counters are the process's: compare what each run added.
	pacedOK := map[string]string{"backend": "paced", "api": "elbv2", "action": "DescribeLoadBalancers", "outcome": "success"}
	before := testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", pacedOK)
	run("paced", RateLimit{QPS: 15, Bucket: 5})
	if n := fake.Throttled(); n != 0 {
		t.Errorf("with the budget, AWS throttled %d requests, want 0", n)
	}
	if got := testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", pacedOK) - before; got != 80 {
		t.Errorf("calls_total{success} grew by %v, want 80", got)
	}

	unpacedThrottled := map[string]string{"backend": "unpaced", "api": "elbv2"}
	unpacedOK := map[string]string{"backend": "unpaced", "outcome": "success"}
	throttledBefore := testutil.CounterSum(t, "multicloud_ccm_cloud_api_throttled_total", unpacedThrottled)
	okBefore := testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", unpacedOK)
	run("unpaced", RateLimit{QPS: -1})
	n := fake.Throttled()
	if n == 0 {
		t.Fatal("without the budget AWS throttled nothing: the test proves nothing")
	}
	if got := testutil.CounterSum(t, "multicloud_ccm_cloud_api_throttled_total", unpacedThrottled) - throttledBefore; got != float64(n) {
		t.Errorf("throttled_total grew by %v, want the %d AWS refused", got, n)
	}
	if got := testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", unpacedOK) - okBefore; got != 80 {
		t.Errorf("calls_total{success} grew by %v, want 80 (each call succeeded once)", got)
	}
}
