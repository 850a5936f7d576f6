package aws

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// probe62Concurrent ensures svcs' NLBs, n at a time, and returns the
// errors.
func probe62Concurrent(c *Cloud, svcs []*corev1.Service, nodes []*corev1.Node, n int) []error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan int)
	for range n {
		wg.Go(func() {
			for i := range next {
				if _, err := c.lb.EnsureLoadBalancer(context.Background(), testCluster, svcs[i], nodes); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", svcs[i].Name, err))
					mu.Unlock()
				}
			}
		})
	}
	for i := range svcs {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs
}

// TestProbe62TenNLBsUnderAWSBuckets: with the default budget (AWS's own
// buckets, per action) and the fake throttling as AWS documents, creating
// 10 NLBs at once succeeds with (nearly) no throttling, in about the time
// AWS's buckets allow.
func TestProbe62TenNLBsUnderAWSBuckets(t *testing.T) {
	e := newEnv(t, defaultBudget)
	nodes := e.awsNodes(1, 3)
	var svcs []*corev1.Service
	for i := range 10 {
		svcs = append(svcs, newService(fmt.Sprintf("probe62-%d", i)))
	}
	limits := awsfake.AWSRateLimits
	e.fake.SetRateLimits(&limits)
	e.fake.ResetCalls()
	before := testutil.CounterSum(t, "multicloud_ccm_cloud_api_throttled_total", map[string]string{"backend": "aws-1"})
	start := time.Now()
	if errs := probe62Concurrent(e.cloud, svcs, nodes, 10); len(errs) > 0 {
		t.Fatalf("creating 10 NLBs: %v", errs)
	}
	took := time.Since(start)
	least, by := limits.Least(e.fake.BucketCalls())
	throttled := e.fake.Throttled()
	t.Logf("10 NLBs in %v (AWS's buckets allow %v, by %s); fake throttled %d; bucket calls %v", took, least, by, throttled, e.fake.BucketCalls())
	if throttled > 1 {
		t.Errorf("the fake (AWS's buckets) throttled %d requests of a client whose budget is AWS's buckets, want (nearly) none", throttled)
	}
	if got := testutil.CounterSum(t, "multicloud_ccm_cloud_api_throttled_total", map[string]string{"backend": "aws-1"}) - before; int(got) != throttled {
		t.Errorf("throttled_total grew by %v, the fake throttled %d", got, throttled)
	}
	if n := len(e.fake.LoadBalancers()); n != 10 {
		t.Errorf("%d NLBs, want 10", n)
	}
	// How long it took is the benchmark's (docs/scale.md), not a test's:
	// logged above.
}

// probe62Handshake serves fake behind a server whose first request on
// each new connection takes handshake longer (a TLS handshake, a DNS
// lookup: later requests reuse the connection), as AWS's endpoints do.
func probe62Handshake(t *testing.T, fake http.Handler, handshake time.Duration) string {
	type connKey struct{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first, ok := r.Context().Value(connKey{}).(*atomic.Bool); ok && !first.Swap(true) {
			time.Sleep(handshake)
		}
		fake.ServeHTTP(w, r)
	}))
	srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, new(atomic.Bool))
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestProbe62ReadsAtAWSBucketWithHandshake: 60 ELBv2 reads in a row, with
// the default budget (AWS's ELBv2 read bucket, 40 at 10 a second) against
// AWS's bucket, the first request paying a 20 ms connection handshake. No
// other tool spends the account's bucket, so AWS should throttle none, and
// the reads take the 2 s AWS's bucket allows. The client's bucket starts
// full at its first request, AWS's at that request's arrival: the client
// is ahead of AWS by the handshake's worth of refill, and with the ceiling
// exactly AWS's, the first read that waits for a refilled token finds
// AWS's bucket a fraction short; the adaptive cut then halves the rate.
func TestProbe62ReadsAtAWSBucketWithHandshake(t *testing.T) {
	e := newEnv(t, defaultBudget)
	c := buildCloud(t, probe62Handshake(t, e.fake, 20*time.Millisecond), defaultBudget)
	limits := awsfake.AWSRateLimits
	e.fake.SetRateLimits(&limits)
	start := time.Now()
	for i := range 60 {
		before := e.fake.Throttled()
		if _, err := c.lb.elb.DescribeLoadBalancers(context.Background(), nil); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if e.fake.Throttled() != before {
			t.Logf("read %d throttled by AWS's bucket at %v", i+1, time.Since(start).Round(time.Millisecond))
		}
	}
	took := time.Since(start)
	least, _ := limits.Least(e.fake.BucketCalls())
	if n := e.fake.Throttled(); n != 0 {
		t.Errorf("60 reads with a budget of AWS's own bucket and nobody else spending it: AWS throttled %d, took %v (AWS's bucket allows %v)", n, took.Round(time.Millisecond), least)
	}
}

// TestProbe62TenNLBsWithHandshake: TestProbe62TenNLBsUnderAWSBuckets with
// each new connection's first request 20 ms slower.
func TestProbe62TenNLBsWithHandshake(t *testing.T) {
	e := newEnv(t)
	c := buildCloud(t, probe62Handshake(t, e.fake, 20*time.Millisecond), defaultBudget)
	nodes := e.awsNodes(1, 3)
	var svcs []*corev1.Service
	for i := range 10 {
		svcs = append(svcs, newService(fmt.Sprintf("probe62-h-%d", i)))
	}
	limits := awsfake.AWSRateLimits
	e.fake.SetRateLimits(&limits)
	e.fake.ResetCalls()
	start := time.Now()
	if errs := probe62Concurrent(c, svcs, nodes, 10); len(errs) > 0 {
		t.Fatalf("creating 10 NLBs: %v", errs)
	}
	took := time.Since(start)
	least, by := limits.Least(e.fake.BucketCalls())
	if n := e.fake.Throttled(); n != 0 {
		t.Errorf("10 NLBs with a budget of AWS's own buckets and nobody else spending them: AWS throttled %d, took %v (AWS's buckets allow %v, by %s)", n, took.Round(time.Millisecond), least, by)
	}
}
