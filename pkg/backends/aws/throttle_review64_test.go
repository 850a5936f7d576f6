package aws

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestReview64HTTP429IsRetriedAsThrottling: docs/aws.md ("API budget")
// says throttling answers are the SDK's codes "and HTTP 429", counted as
// throttled in calls_total and in the router's errors metric, and that
// they "are retried with exponential backoff and jitter ...; they reach a
// Service's events only once the attempts are spent". A 429 whose body
// names no code of the SDK's list (a proxy or a private endpoint between
// the CCM and AWS answering "429 Too Many Requests") is classed throttled
// (ClassifyError), so the adaptive budget slows down for it; the operator
// expects it retried as well, like every answer the same metric calls
// throttling: two 429s in front of a read with 6 attempts must not fail
// it.
func TestReview64HTTP429IsRetriedAsThrottling(t *testing.T) {
	e := newEnv(t)
	target, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var left atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if left.Add(-1) >= 0 {
			http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c := buildCloud(t, srv.URL)

	left.Store(2)
	_, err = c.lb.elb.DescribeLoadBalancers(context.Background(), nil)
	if err == nil {
		return
	}
	class := backends.ClassifyErrorOf(Type, err)
	t.Errorf("a read answered 429 twice, then by AWS, with 6 attempts: %v (class %s, %d 429s left unsent), want it retried to success", err, class, max(left.Load(), 0))
	if class != backends.ClassThrottled {
		t.Logf("(the error is not even classed throttled)")
	}
}
