package cloudapi

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/smithy-go/middleware"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// probe62Defaults is an API "x" kept per action, both kinds.
func probe62Defaults(qps float64, bucket int, qpsWrite float64, bucketWrite int) map[string]RateLimit {
	return map[string]RateLimit{"x": {QPS: qps, Bucket: bucket, QPSWrite: qpsWrite, BucketWrite: bucketWrite, PerActionReads: true, PerActionWrites: true}}
}

func probe62Short(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// probe62Keys lists the action buckets an API's budget holds.
func probe62Keys(a *apiBudget) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for k := range a.actions {
		kind := "read"
		if k.write {
			kind = "write"
		}
		out = append(out, kind+":"+k.action)
	}
	sort.Strings(out)
	return out
}

func probe62Gauge(t *testing.T, backend, api, kind string) float64 {
	t.Helper()
	return testutil.GaugeValue(t, "multicloud_ccm_cloud_api_budget_rate", map[string]string{"backend": backend, "api": api, "kind": kind})
}

// TestProbe62GateRefusalGivesTokenBackToActionBucket: a write that waited
// for its action's token and is then refused by the mutation gate gives
// that token back to its own action's bucket (not the API's "" bucket,
// not another action's), and makes no other bucket.
func TestProbe62GateRefusalGivesTokenBackToActionBucket(t *testing.T) {
	var closed atomic.Bool
	calls := setGate(t, &closed)
	b := NewBudget("probe62-gate", nil, map[string]RateLimit{"x": {QPS: 100, Bucket: 100, QPSWrite: 5, BucketWrite: 1, Mode: ModeFixed, PerActionReads: true, PerActionWrites: true}})
	ctx := context.Background()
	if err := b.WaitAction(ctx, "x", "Create", true); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.WaitAction(ctx, "x", "Create", true) }()
	for calls.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	closed.Store(true)
	if err := <-done; !errors.Is(err, ErrMutationRefused) {
		t.Fatalf("refused after its wait: %v", err)
	}
	a := b.api("x")
	if got := probe62Keys(a); len(got) != 1 || got[0] != "write:Create" {
		t.Errorf("buckets after the refusal: %v, want only write:Create", got)
	}
	if tok := a.bucket("Create", true).lim.Tokens(); tok < 0.5 {
		t.Errorf("Create's bucket holds %.2f tokens after the refused write, want its token back", tok)
	}
	closed.Store(false)
	if !a.bucket("Create", true).lim.Allow() {
		t.Error("the gate open again, Create's next write has no token at once")
	}
}

// TestProbe62RetuneReplacesActionBuckets: Retune after action buckets
// exist (one of them slowed by throttling) gives each action a bucket of
// the new limits, drops the old ones, and sets the gauge to the new
// ceiling of each kind.
func TestProbe62RetuneReplacesActionBuckets(t *testing.T) {
	defaults := probe62Defaults(10, 1, 8, 1)
	const be = "probe62-retune"
	b := NewBudget(be, nil, defaults)
	for _, act := range []string{"Create", "Delete"} {
		if err := b.WaitAction(probe62Short(t, time.Second), "x", act, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.WaitAction(probe62Short(t, time.Second), "x", "Describe", false); err != nil {
		t.Fatal(err)
	}
	b.Observe("x", "Delete", true, OutcomeThrottled, 0)
	if g := probe62Gauge(t, be, "x", "write"); g != 4 {
		t.Fatalf("write gauge %v after Delete throttled, want 4", g)
	}
	old := b.api("x")

	b.Retune("", map[string]RateLimit{"x": {QPS: 20, Bucket: 2, QPSWrite: 16, BucketWrite: 3}}, defaults)
	a := b.api("x")
	if a == old {
		t.Fatal("Retune kept the old API budget")
	}
	if got := probe62Keys(a); len(got) != 0 {
		t.Errorf("buckets right after Retune: %v, want none (made at first request)", got)
	}
	if g := probe62Gauge(t, be, "x", "write"); g != 16 {
		t.Errorf("write gauge after Retune = %v, want the new ceiling 16", g)
	}
	if g := probe62Gauge(t, be, "x", "read"); g != 20 {
		t.Errorf("read gauge after Retune = %v, want the new ceiling 20", g)
	}
	for _, act := range []string{"Create", "Delete", "Modify"} {
		for i := range 3 {
			if err := b.WaitAction(probe62Short(t, time.Second), "x", act, true); err != nil {
				t.Fatalf("%s %d within the new bucketWrite 3: %v", act, i, err)
			}
		}
		if err := b.WaitAction(probe62Short(t, 5*time.Millisecond), "x", act, true); !errors.Is(err, ErrPastDeadline) {
			t.Errorf("%s: a 4th write within 5 ms at 16/s = %v, want ErrPastDeadline", act, err)
		}
		bk := b.bucket("x", act, true)
		if bk.ceiling != 16 || bk.burst != 3 || bk.rate() != 16 {
			t.Errorf("%s's bucket after Retune: ceiling %v burst %d rate %v, want 16, 3, 16", act, bk.ceiling, bk.burst, bk.rate())
		}
	}
	// A throttled answer now halves the new ceiling, and the gauge shows it.
	b.Observe("x", "Create", true, OutcomeThrottled, 0)
	if g := probe62Gauge(t, be, "x", "write"); g != 8 {
		t.Errorf("write gauge after a throttle post-Retune = %v, want 8", g)
	}
}

// TestProbe62RetuneWhileWaiting: waits under way on per-action buckets
// when Retune comes finish (on the old bucket), and requests after it use
// the new ones; nothing deadlocks.
func TestProbe62RetuneWhileWaiting(t *testing.T) {
	defaults := probe62Defaults(5, 1, 5, 1)
	b := NewBudget("probe62-retune-wait", nil, defaults)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 8 {
		for _, write := range []bool{false, true} {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				errs <- b.WaitAction(ctx, "x", fmt.Sprintf("A%d", i%2), write)
			})
		}
	}
	time.Sleep(50 * time.Millisecond)
	b.Retune("", map[string]RateLimit{"x": {QPS: 1000, Bucket: 1000, QPSWrite: 1000, BucketWrite: 1000}}, defaults)
	start := time.Now()
	for range 20 {
		if err := b.WaitAction(probe62Short(t, 10*time.Millisecond), "x", "A0", true); err != nil {
			t.Fatalf("after Retune to 1000: %v", err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("20 writes after Retune to 1000 took %v", d)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a wait under way at Retune: %v", err)
		}
	}
}

// TestProbe62SharedBudgetRetuneAppliesToEveryAction: two backends share
// per-action buckets; a Retune of one (same key) gives both the new limits
// for every action, and they are still shared after it.
func TestProbe62SharedBudgetRetuneAppliesToEveryAction(t *testing.T) {
	defaults := probe62Defaults(8, 1, 8, 1)
	const key = "probe62-shared-key"
	a := NewSharedBudget("probe62-shared-a", key, nil, defaults)
	o := NewSharedBudget("probe62-shared-b", key, nil, defaults)
	if err := a.WaitAction(probe62Short(t, time.Second), "x", "Create", true); err != nil {
		t.Fatal(err)
	}
	if err := o.WaitAction(probe62Short(t, 20*time.Millisecond), "x", "Create", true); err == nil {
		t.Fatal("Create's bucket is not shared")
	}
	a.Retune(key, map[string]RateLimit{"x": {QPSWrite: 8, BucketWrite: 2}}, defaults)
	for _, act := range []string{"Create", "Delete"} {
		for i := range 2 {
			if err := o.WaitAction(probe62Short(t, time.Second), "x", act, true); err != nil {
				t.Fatalf("other backend %s %d after the retune to bucketWrite 2: %v", act, i, err)
			}
		}
		if err := a.WaitAction(probe62Short(t, 20*time.Millisecond), "x", act, true); err == nil {
			t.Errorf("%s: the retuned backend found a full bucket the other had spent: no longer shared", act)
		}
	}
	third := NewSharedBudget("probe62-shared-c", key, nil, defaults)
	if third.buckets() != a.buckets() {
		t.Error("a new backend of the key after the retune has buckets of its own")
	}
}

// TestProbe62SharedBudgetGaugeOfOtherBackend: the gauge of every backend
// sharing buckets shows the shared buckets' rate: after backend B saw a
// throttle (its gauge halved) and A retuned the shared buckets (full, at
// the new ceiling), B's gauge shows the new ceiling; and a throttle A sees
// on the shared bucket shows in B's gauge too.
func TestProbe62SharedBudgetGaugeOfOtherBackend(t *testing.T) {
	defaults := probe62Defaults(8, 1, 8, 1)
	const key = "probe62-gauge-key"
	a := NewSharedBudget("probe62-gauge-a", key, nil, defaults)
	o := NewSharedBudget("probe62-gauge-b", key, nil, defaults)
	o.Observe("x", "Create", true, OutcomeThrottled, 0)
	if g := probe62Gauge(t, "probe62-gauge-b", "x", "write"); g != 4 {
		t.Fatalf("B's write gauge %v after its throttle, want 4", g)
	}
	a.Retune(key, map[string]RateLimit{"x": {QPSWrite: 6}}, defaults)
	if r, _ := o.api("x").rate(true); r != 6 {
		t.Fatalf("the shared write rate after A's retune = %v, want 6", r)
	}
	if g := probe62Gauge(t, "probe62-gauge-b", "x", "write"); g != 6 {
		t.Errorf("B's write gauge after A retuned the shared buckets = %v, want the new ceiling 6 (B's buckets are at 6)", g)
	}
	a.Observe("x", "Delete", true, OutcomeThrottled, 0)
	if r, _ := o.api("x").rate(true); r != 3 {
		t.Fatalf("shared write rate after A's throttle = %v, want 3", r)
	}
	if g := probe62Gauge(t, "probe62-gauge-b", "x", "write"); g != 3 {
		t.Errorf("B's write gauge after A's throttle slowed the shared bucket = %v, want 3", g)
	}
}

// TestProbe62ReadsOffWritesPerAction: with AWS's defaults and EC2 reads
// off (-1), reads never wait and make no bucket, have no rate (the gauge
// deleted on Retune, never set by Observe), while each write action keeps
// its own bucket.
func TestProbe62ReadsOffWritesPerAction(t *testing.T) {
	const be = "probe62-readsoff"
	limits := map[string]RateLimit{APIEC2: {QPS: Off, QPSWrite: 0.001, BucketWrite: 1}}
	b := NewBudget(be, limits, AWSDefaults)
	for i := range 500 {
		if err := b.WaitAction(probe62Short(t, time.Millisecond), APIEC2, "DescribeInstances", false); err != nil {
			t.Fatalf("read %d with reads off: %v", i, err)
		}
	}
	b.Observe(APIEC2, "DescribeInstances", false, OutcomeThrottled, 0)
	a := b.api(APIEC2)
	if got := probe62Keys(a); len(got) != 0 {
		t.Errorf("buckets with reads off, no write yet: %v", got)
	}
	if _, ok := a.rate(false); ok {
		t.Error("reads off have a rate")
	}
	if g := probe62Gauge(t, be, APIEC2, "read"); g != 0 {
		t.Errorf("read gauge with reads off = %v, want none", g)
	}
	if err := b.WaitAction(probe62Short(t, time.Second), APIEC2, "CreateSecurityGroup", true); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitAction(probe62Short(t, 20*time.Millisecond), APIEC2, "CreateSecurityGroup", true); err == nil {
		t.Error("a second CreateSecurityGroup within bucketWrite 1 did not wait")
	}
	if err := b.WaitAction(probe62Short(t, 20*time.Millisecond), APIEC2, "AuthorizeSecurityGroupIngress", true); err != nil {
		t.Errorf("another write action waited for CreateSecurityGroup's bucket: %v", err)
	}
	// Read gauge set (reads on), then retuned to off: deleted.
	b.Retune("", nil, AWSDefaults)
	if g := probe62Gauge(t, be, APIEC2, "read"); g != 20 {
		t.Errorf("read gauge after Retune to defaults = %v, want 20", g)
	}
	b.Retune("", limits, AWSDefaults)
	if g := probe62Gauge(t, be, APIEC2, "read"); g != 0 {
		t.Errorf("read gauge after Retune to reads off = %v, want none", g)
	}
	if g := probe62Gauge(t, be, APIEC2, "write"); g != 0.001 {
		t.Errorf("write gauge after Retune = %v, want 0.001", g)
	}
}

// TestProbe62AdaptiveIsolationAndRecovery: throttling of one action slows
// only that action's bucket; the gauge shows the slowest; successes of
// that action bring it and the gauge back to the ceiling.
func TestProbe62AdaptiveIsolationAndRecovery(t *testing.T) {
	const be = "probe62-adapt"
	b := NewBudget(be, nil, AWSDefaults)
	clock := &fakeClock{t: time.Unix(5000, 0)}
	slow, other := b.bucket(APIEC2, "DescribeInstances", false), b.bucket(APIEC2, "DescribeSubnets", false)
	slow.now, other.now = clock.now, clock.now
	for i := range 3 {
		if i > 0 { // a cut at most once a window; read right after the last
			clock.advance(adaptWindow)
		}
		b.Observe(APIEC2, "DescribeInstances", false, OutcomeThrottled, 0)
	}
	if r := slow.rate(); r != 2.5 {
		t.Fatalf("DescribeInstances after 3 throttles: %v, want 2.5", r)
	}
	b.Observe(APIEC2, "DescribeSubnets", false, OutcomeSuccess, 0)
	if r := other.rate(); r != 20 {
		t.Errorf("DescribeSubnets moved to %v", r)
	}
	if g := probe62Gauge(t, be, APIEC2, "read"); g != 2.5 {
		t.Errorf("read gauge %v, want the slowest 2.5", g)
	}
	if w := b.bucket(APIEC2, "DescribeInstances", true); w == slow {
		t.Error("a write of the same action name shares the read bucket")
	}
	for range 12 {
		clock.advance(adaptWindow)
		b.Observe(APIEC2, "DescribeInstances", false, OutcomeSuccess, 0)
	}
	if r := slow.rate(); r != 20 {
		t.Errorf("DescribeInstances after 12 s of successes: %v, want 20", r)
	}
	if g := probe62Gauge(t, be, APIEC2, "read"); g != 20 {
		t.Errorf("read gauge after recovery = %v, want the ceiling 20", g)
	}
}

// TestProbe62IdleActionRecovers: the adaptive law says a bucket "climbs
// back by a tenth of the ceiling for each second without throttling", and
// the gauge's help says it is "back at the configured ceiling once the
// throttling stops". With one bucket per action, an action throttled once
// and then idle (a burst of CreateLoadBalancer) keeps its slowed rate, and
// holds the kind's gauge down, however long nothing is throttled while
// other actions succeed.
func TestProbe62IdleActionRecovers(t *testing.T) {
	const be = "probe62-idle"
	b := NewBudget(be, nil, AWSDefaults)
	clock := &fakeClock{t: time.Unix(5000, 0)}
	create, reg := b.bucket(APIELBv2, "CreateLoadBalancer", true), b.bucket(APIELBv2, "RegisterTargets", true)
	create.now, reg.now = clock.now, clock.now
	for i := range 2 {
		if i > 0 {
			clock.advance(adaptWindow)
		}
		b.Observe(APIELBv2, "CreateLoadBalancer", true, OutcomeThrottled, 0)
	}
	if r := create.rate(); r != 0.5 {
		t.Fatalf("CreateLoadBalancer after 2 throttles: %v, want 0.5", r)
	}
	// An hour without throttling; other mutations succeed all along.
	for range 3600 {
		clock.advance(adaptWindow)
		b.Observe(APIELBv2, "RegisterTargets", true, OutcomeSuccess, 0)
	}
	if g := probe62Gauge(t, be, APIELBv2, "write"); g != 2 {
		t.Errorf("write gauge after an hour without throttling = %v, want the ceiling 2", g)
	}
	if r := create.rate(); r != 2 {
		t.Errorf("CreateLoadBalancer's bucket after an hour without throttling: %v a second (burst %d), want the ceiling 2 (burst 20)", r, create.lim.Burst())
	}
}

// TestProbe62ConcurrentActionBuckets: many goroutines making, waiting on,
// observing and reading the rate of action buckets while Retune replaces
// them; run under -race. One bucket per action and kind, whatever the
// races.
func TestProbe62ConcurrentActionBuckets(t *testing.T) {
	big := map[string]RateLimit{APIEC2: {QPS: 1e6, Bucket: 1e6, QPSWrite: 1e6, BucketWrite: 1e6}, APIELBv2: {QPS: 1e6, Bucket: 1e6, QPSWrite: 1e6, BucketWrite: 1e6}}
	b := NewSharedBudget("probe62-conc-a", "probe62-conc", big, AWSDefaults)
	o := NewSharedBudget("probe62-conc-b", "probe62-conc", big, AWSDefaults)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				b.Retune("probe62-conc", big, AWSDefaults)
				time.Sleep(time.Millisecond)
			}
		}
	})
	var work sync.WaitGroup
	for g := range 16 {
		work.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			bb := b
			if g%2 == 1 {
				bb = o
			}
			for i := range 400 {
				api := []string{APIEC2, APIELBv2}[r.IntN(2)]
				act := fmt.Sprintf("Act%d", r.IntN(30))
				write := r.IntN(2) == 0
				if err := bb.WaitAction(context.Background(), api, act, write); err != nil {
					t.Errorf("wait: %v", err)
					return
				}
				out := OutcomeSuccess
				if i%7 == 0 {
					out = OutcomeThrottled
				}
				bb.Observe(api, act, write, out, 0)
				_, _ = bb.api(api).rate(write)
			}
		})
	}
	work.Wait()
	close(stop)
	wg.Wait()
	// After the storm, with no Retune racing: each action has one bucket
	// for both backends.
	var mk sync.WaitGroup
	got := make([]*bucket, 32)
	for i := range got {
		mk.Go(func() {
			bb := b
			if i%2 == 1 {
				bb = o
			}
			got[i] = bb.bucket(APIEC2, "Concurrent", true)
		})
	}
	mk.Wait()
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("concurrent first requests of one action made two buckets")
		}
	}
}

// TestProbe62EmptyAndUnknownActions: Wait is WaitAction with action "":
// on a per-action API it takes the "" bucket, apart from every named
// action's; an API the budget does not know is not limited and makes
// nothing; WaitSession takes the "" write bucket ungated.
func TestProbe62EmptyAndUnknownActions(t *testing.T) {
	defaults := probe62Defaults(0.001, 1, 0.001, 1)
	b := NewBudget("probe62-empty", nil, defaults)
	if err := b.Wait(probe62Short(t, time.Second), "x", false); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitAction(probe62Short(t, 20*time.Millisecond), "x", "", false); err == nil {
		t.Error(`Wait and WaitAction "" are not the same bucket`)
	}
	if err := b.WaitAction(probe62Short(t, 20*time.Millisecond), "x", "Named", false); err != nil {
		t.Errorf("a named action waited for the \"\" bucket: %v", err)
	}
	for range 100 {
		if err := b.WaitAction(probe62Short(t, time.Millisecond), "unknown", "Whatever", true); err != nil {
			t.Fatalf("unknown API limited: %v", err)
		}
	}
	b.Observe("unknown", "Whatever", true, OutcomeThrottled, 0)
	var closed atomic.Bool
	setGate(t, &closed)
	closed.Store(true)
	if err := b.WaitSession(probe62Short(t, time.Second), "x", ""); err != nil {
		t.Errorf("WaitSession with the gate closed: %v", err)
	}
	if err := b.WaitAction(probe62Short(t, time.Second), "x", "Other", true); !errors.Is(err, ErrMutationRefused) {
		t.Errorf("write with the gate closed: %v", err)
	}
	if got := probe62Keys(b.api("x")); fmt.Sprint(got) != "[read: read:Named write:]" {
		t.Errorf("buckets = %v, want [read: read:Named write:] (a refused write makes none)", got)
	}
}

func probe62EC2Client(url string, b *Budget) *ec2.Client {
	return ec2.New(ec2.Options{
		Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "secret", ""),
		BaseEndpoint: awssdk.String(url),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts, o.MaxBackoff, o.RateLimiter = 20, 200*time.Millisecond, ratelimit.None
		}),
		APIOptions: []func(*middleware.Stack) error{AWSAPIOptions(b, sdkThrottle)},
	})
}

// TestProbe62MiddlewareNamesActions: through the SDK middleware each
// request takes the bucket of its own operation name (never the ""
// bucket: GetOperationName is set at the Finalize step), so the action
// buckets are bounded by the SDK's operations; retries take the same
// bucket.
func TestProbe62MiddlewareNamesActions(t *testing.T) {
	fake := awsfake.New("eu-west-1")
	srv := httptest.NewServer(fake)
	defer srv.Close()
	b := NewBudget("probe62-mw", nil, AWSDefaults)
	ctx := context.Background()
	e := probe62EC2Client(srv.URL, b)
	l := elbClient(srv.URL, b)
	fake.AddVPC("vpc-1", "10.0.0.0/16")
	for range 3 {
		_, _ = e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		_, _ = e.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
		_, _ = l.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{})
	}
	fake.Throttle(2)
	_, _ = e.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: new("g"), Description: new("d"), VpcId: new("vpc-1")})
	_, _ = l.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: new("tg")})
	if got := fmt.Sprint(probe62Keys(b.api(APIEC2))); got != "[read:DescribeInstances read:DescribeSubnets write:CreateSecurityGroup]" {
		t.Errorf("EC2 buckets = %s", got)
	}
	if got := fmt.Sprint(probe62Keys(b.api(APIELBv2))); got != "[write:CreateTargetGroup]" {
		t.Errorf("ELBv2 action buckets = %s (reads share one bucket)", got)
	}
}

// TestProbe62TransportObservesTheBucketItWaitedOn: Observe adapts "the
// bucket it took its token from". The HTTP Transport waits with Wait
// (action "") but observes under its Action name: on an API kept per
// action the throttling cuts a bucket no request waits on, and each
// distinct Action name (a URL, say) makes a bucket for ever. Latent: no
// Transport backend's defaults are per action today.
func TestProbe62TransportObservesTheBucketItWaitedOn(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	b := NewBudget("probe62-transport", nil, probe62Defaults(8, 100, 8, 100))
	tr := &Transport{Budget: b, DefaultAPI: "x", Action: func(r *http.Request) string { return "GET " + r.URL.Path }, MaxBackoff: time.Millisecond}
	c := &http.Client{Transport: tr}
	for i := range 5 {
		resp, err := c.Get(fmt.Sprintf("%s/things/%d", srv.URL, i))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	// Fixed: the Transport waits on the bucket of the action it observes
	// (WaitAction), so the throttled answer slows the bucket the request
	// took its token from, and no bucket of "" is made beside them. (An
	// API with a bucket per action needs a bounded set of action names:
	// none of the HTTP APIs has one; AWS's are the SDK's operations.)
	if got := probe62Keys(b.api("x")); slices.Contains(got, "read:") {
		t.Errorf("a bucket of \"\" beside the actions' own: %v", got)
	}
	if r := b.bucket("x", "GET /things/0", false).rate(); r == 8 {
		t.Errorf("the bucket the throttled request waited on still at 8; buckets: %v", probe62Keys(b.api("x")))
	}
}
