package cloudapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/smithy-go"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestAdaptiveBucketControlLaw: a throttling answer halves the rate, once
// for the answers of one window; the rate never goes under a sixteenth of
// the ceiling; successes climb back a tenth of the ceiling a second, from
// a second after the last cut, and never past the ceiling; the burst
// follows the rate; a fixed bucket never moves.
func TestAdaptiveBucketControlLaw(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	b := newBucket(8, 16, ModeAdaptive)
	b.now = clock.now

	if b.answered(false) {
		t.Fatal("a success at the ceiling changed the rate")
	}
	if !b.answered(true) || b.rate() != 4 {
		t.Fatalf("after a throttle: rate %v, want 4", b.rate())
	}
	if b.lim.Burst() != 8 {
		t.Errorf("burst %d at half the rate, want 8 (half of 16)", b.lim.Burst())
	}
	// The other answers of the same window: no further cut.
	clock.advance(500 * time.Millisecond)
	if b.answered(true) || b.rate() != 4 {
		t.Fatalf("a second throttle within the window: rate %v, want 4", b.rate())
	}
	// Nor a raise within a second of the cut.
	if b.answered(false) || b.rate() != 4 {
		t.Fatalf("a success within a second of the cut: rate %v, want 4", b.rate())
	}
	for _, want := range []float64{2, 1, 0.5, 0.5} {
		clock.advance(adaptWindow)
		b.answered(true)
		if b.rate() != want {
			t.Fatalf("after a throttle a window later: rate %v, want %v", b.rate(), want)
		}
	}
	if b.lim.Burst() != 1 {
		t.Errorf("burst %d at the floor, want 1", b.lim.Burst())
	}
	// Climbing back: +0.8 a second, one raise per window however many
	// successes.
	clock.advance(adaptWindow)
	b.answered(false)
	b.answered(false)
	if got := b.rate(); got != 1.3 {
		t.Fatalf("after successes a second on: rate %v, want 1.3", got)
	}
	for range 20 {
		clock.advance(adaptWindow)
		b.answered(false)
	}
	if b.rate() != 8 || b.lim.Limit() != 8 || b.lim.Burst() != 16 {
		t.Errorf("after 20 s of successes: rate %v, limiter %v burst %d, want the ceiling 8 and 16", b.rate(), b.lim.Limit(), b.lim.Burst())
	}

	fixed := newBucket(8, 16, ModeFixed)
	fixed.now = clock.now
	for range 5 {
		clock.advance(adaptWindow)
		if fixed.answered(true) {
			t.Fatal("a fixed bucket changed its rate")
		}
	}
	if fixed.lim.Limit() != 8 {
		t.Errorf("fixed bucket's rate %v, want 8", fixed.lim.Limit())
	}
	if newBucket(Off, 0, ModeAdaptive) != nil {
		t.Error("a bucket turned off exists")
	}
}

// TestRateLimitMode: the mode defaults to adaptive, a backend's default
// mode and a configured one win in that order, and an unknown mode is an
// error naming the field and the modes there are.
func TestRateLimitMode(t *testing.T) {
	if got := (RateLimit{}).WithDefaults(RateLimit{QPS: 1}).Mode; got != ModeAdaptive {
		t.Errorf("default mode %q, want adaptive", got)
	}
	if got := (RateLimit{Mode: ModeFixed}).WithDefaults(RateLimit{}).Mode; got != ModeFixed {
		t.Errorf("configured mode %q, want fixed", got)
	}
	errs := RateLimit{Mode: "aimd"}.Validate(field.NewPath("aws", "rateLimits").Key("elbv2"))
	if len(errs) != 1 || !strings.Contains(errs.ToAggregate().Error(), `aws.rateLimits[elbv2].mode: Unsupported value: "aimd": supported values: "adaptive", "fixed"`) {
		t.Errorf("errors = %v", errs)
	}
}

// TestAdaptiveBudgetFollowsTheCloud: throttling answers through the AWS
// SDK (the fake's ELBv2 bucket spent) slow the budget's bucket down and
// set budget_rate; the calls still all succeed, retried by the SDK.
func TestAdaptiveBudgetFollowsTheCloud(t *testing.T) {
	fake := awsfake.New("eu-west-1")
	srv := httptest.NewServer(fake)
	defer srv.Close()
	fake.SetRateLimits(&awsfake.RateLimits{ELBv2Read: awsfake.Bucket{Capacity: 2, Refill: 4}})
	b := NewBudget("adapts", map[string]RateLimit{APIELBv2: {QPS: 40, Bucket: 40}}, AWSDefaults)
	c := elbClient(srv.URL, b)
	for i := range 12 {
		if _, err := c.DescribeLoadBalancers(context.Background(), &elbv2.DescribeLoadBalancersInput{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if fake.Throttled() == 0 {
		t.Fatal("the fake throttled nothing: the test proves nothing")
	}
	if r := b.bucket(APIELBv2, "DescribeLoadBalancers", false).rate(); r >= 40 {
		t.Errorf("rate %v after %d throttling answers, want under the ceiling of 40", r, fake.Throttled())
	}
	got := testutil.GaugeValue(t, "multicloud_ccm_cloud_api_budget_rate", map[string]string{"backend": "adapts", "api": "elbv2", "kind": "read"})
	if got >= 40 || got <= 0 {
		t.Errorf("budget_rate = %v, want the slowed rate", got)
	}
	if w := b.bucket(APIELBv2, "CreateLoadBalancer", true).rate(); w != AWSDefaults[APIELBv2].QPSWrite {
		t.Errorf("the write bucket moved to %v with no write throttled", w)
	}
}

// BenchmarkThrottlingStorm: another tool of the account spends most of
// the fake's ELBv2 read bucket (AWS's 10 a second) at 8 a second while the
// CCM makes 40 reads with a budget whose ceiling is the whole bucket, 4
// at a time; fixed against adaptive. Reported: the CCM's requests AWS
// throttled (each one a token of the account's bucket spent for nothing,
// and a retry), the other tool's requests AWS throttled because of the
// CCM, and the run's time.
func BenchmarkThrottlingStorm(b *testing.B) {
	for _, mode := range []string{ModeFixed, ModeAdaptive} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				ccm, other, took := throttlingStorm(b, mode)
				b.ReportMetric(float64(ccm), "ccm-throttled/op")
				b.ReportMetric(float64(other), "other-throttled/op")
				b.ReportMetric(took.Seconds(), "s/op")
			}
		})
	}
}

func throttlingStorm(b *testing.B, mode string) (ccmThrottled, otherThrottled int, took time.Duration) {
	fake := awsfake.New("eu-west-1")
	srv := httptest.NewServer(fake)
	defer srv.Close()
	fake.SetRateLimits(&awsfake.RateLimits{ELBv2Read: awsfake.Bucket{Capacity: 10, Refill: 10}})

	// The other tool: 8 reads a second, no budget, no retries, counting
	// its throttled answers.
	tool := elbv2.New(elbv2.Options{
		Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDOTHER", "secret", ""),
		BaseEndpoint: awssdk.String(srv.URL), Retryer: awssdk.NopRetryer{},
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var other atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(125 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_, err := tool.DescribeLoadBalancers(context.Background(), &elbv2.DescribeLoadBalancersInput{})
				var ae smithy.APIError
				if errors.As(err, &ae) && ae.ErrorCode() == "Throttling" {
					other.Add(1)
				}
			}
		}
	}()
	time.Sleep(time.Second) // the other tool at its pace: the bucket near empty

	budget := NewBudget("storm-"+mode, map[string]RateLimit{APIELBv2: {QPS: 10, Bucket: 10, Mode: mode}}, AWSDefaults)
	c := elbClient(srv.URL, budget)
	before := fake.Throttled()
	otherBefore := other.Load()
	start := time.Now()
	var calls sync.WaitGroup
	for range 4 {
		calls.Add(1)
		go func() {
			defer calls.Done()
			for range 10 {
				if _, err := c.DescribeLoadBalancers(context.Background(), &elbv2.DescribeLoadBalancersInput{}); err != nil {
					b.Errorf("a CCM call failed: %v", err)
					return
				}
			}
		}()
	}
	calls.Wait()
	took = time.Since(start)
	otherDuring := int(other.Load() - otherBefore)
	close(stop)
	wg.Wait()
	return fake.Throttled() - before - otherDuring, otherDuring, took
}
