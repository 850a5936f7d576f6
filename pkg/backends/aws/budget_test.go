package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// TestBudgetKeepsRepairUnderAWSBuckets: 12 NLBs re-ensured in a repair
// pass, 6 at a time, against the fake with AWS's token buckets (scaled
// down: 10 tokens refilled at 20 a second for reads). With the backend's
// rateLimits under them AWS throttles nothing; with the budget off the
// same pass is throttled. A throttling storm (30 throttled answers in a
// row) slows the pass without failing a Service: the retryer backs off.
func TestBudgetKeepsRepairUnderAWSBuckets(t *testing.T) {
	under := map[string]cloudapi.RateLimit{
		cloudapi.APIELBv2: {QPS: 15, Bucket: 5, QPSWrite: -1},
		cloudapi.APIEC2:   {QPS: 15, Bucket: 5, QPSWrite: -1},
	}
	// Enough attempts to outlast the storm below (each attempt of one call
	// may be among its 30 throttled answers).
	e := newEnv(t, func(s *Settings) { s.RateLimits, s.Retry.MaxAttempts = under, 40 })
	var nodes []*corev1.Node
	for i := 1; i <= 2; i++ {
		in := e.addInstance(i)
		nodes = append(nodes, newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0])))
	}
	var svcs []*corev1.Service
	for i := range 12 {
		svc := newService(fmt.Sprintf("svc-%d", i))
		e.ensure(t, svc, nodes)
		svcs = append(svcs, svc)
	}
	e.fake.ResetCalls()

	repair := func(c *Cloud) []error {
		ctx, end, err := c.BeginRepairPass(context.Background(), testCluster)
		if err != nil {
			return []error{err}
		}
		defer end()
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		next := make(chan int)
		for range 6 {
			wg.Go(func() {
				for i := range next {
					if _, err := c.lb.EnsureLoadBalancer(ctx, testCluster, svcs[i], nodes); err != nil {
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
	buckets := &awsfake.RateLimits{
		EC2Read: awsfake.Bucket{Capacity: 10, Refill: 20}, EC2Write: awsfake.Bucket{Capacity: 100, Refill: 100},
		ELBv2Read: awsfake.Bucket{Capacity: 10, Refill: 20}, ELBv2Write: awsfake.Bucket{Capacity: 100, Refill: 100},
	}

	e.fake.SetRateLimits(buckets)
	if errs := repair(e.cloud); len(errs) > 0 {
		t.Fatalf("within the budget: %v", errs)
	}
	if n := e.fake.Throttled(); n != 0 {
		t.Errorf("within the budget AWS throttled %d requests, want 0", n)
	}

	// The same pass without a budget: AWS throttles it (and with this
	// test's 6 attempts 5 ms apart, Services fail).
	unlimited := buildCloud(t, e.url, func(s *Settings) { s.RateLimits = budgetOff })
	e.fake.SetRateLimits(buckets)
	errs := repair(unlimited)
	if e.fake.Throttled() == 0 {
		t.Fatal("without the budget AWS throttled nothing: the test proves nothing about the budget")
	}
	t.Logf("without the budget: %d requests throttled, %d of %d Services failed", e.fake.Throttled(), len(errs), len(svcs))

	before := throttledCount(t)
	e.fake.SetRateLimits(nil)
	e.fake.Throttle(30)
	if errs := repair(e.cloud); len(errs) > 0 {
		t.Fatalf("a throttling storm failed Services: %v", errs)
	}
	if got := throttledCount(t) - before; got != 30 {
		t.Errorf("multicloud_ccm_cloud_api_throttled_total grew by %v, want the storm's 30", got)
	}
	if m := e.fake.MutatingCalls(); len(m) > 0 {
		t.Errorf("re-ensuring converged NLBs made mutating calls %v", m)
	}
}

// budgetOff turns both APIs' budgets off (rateLimits qps and qpsWrite -1).
var budgetOff = map[string]cloudapi.RateLimit{
	cloudapi.APIEC2:   {QPS: cloudapi.Off, QPSWrite: cloudapi.Off},
	cloudapi.APIELBv2: {QPS: cloudapi.Off, QPSWrite: cloudapi.Off},
}

// noBudget turns the backend's API budget off, for tests whose calls are
// about something else and many: the conformance suites (245 s and 214 s
// under the default budget of then, 35 s and 3.5 s without), the
// 2,500-node sweep (2,500 single DescribeInstances at the default 20 a
// second) and
// the drift and repair-pass tests (newDriftEnv: 99 s for
// TestDriftRepairedAndReported, 5 s without).
func noBudget(s *Settings) { s.RateLimits = budgetOff }

// testBudget gives the backend a budget no test waits on: both APIs'
// reads and mutations at 10,000 a second, 10,000 at once, adaptive (the
// default mode), so a test's calls still go through the budget (its
// waits, its throttling cuts, its metrics) without pacing. buildCloud
// applies it before a test's own tweaks: the tests not about the budget
// waited on the default one (pkg/backends/aws took 509 s under -race, most
// of it in the budget's waits), and a test about the budget sets its
// rateLimits, or the defaults with defaultBudget.
func testBudget(s *Settings) {
	fast := cloudapi.RateLimit{QPS: 10000, Bucket: 10000, QPSWrite: 10000, BucketWrite: 10000}
	s.RateLimits = map[string]cloudapi.RateLimit{cloudapi.APIEC2: fast, cloudapi.APIELBv2: fast}
}

// defaultBudget gives the backend the default budget (no rateLimits:
// cloudapi.AWSDefaults), for the tests of that default.
func defaultBudget(s *Settings) { s.RateLimits = nil }

// TestBudgetOnByDefault: a backend whose section has no rateLimits paces
// its reads at AWS's own buckets: 50 DescribeLoadBalancers in a row spend
// the default ELBv2 read bucket of 39 (AWS's 40 less a token of margin)
// and wait for the rest at 10 a second
// (about 1 s, counted in budget_wait_seconds_total{api=elbv2}), and none
// fails. With qps and qpsWrite -1 the same burst never waits.
func TestBudgetOnByDefault(t *testing.T) {
	burst := func(c *Cloud) float64 {
		before := testutil.CounterSum(t, "multicloud_ccm_cloud_api_budget_wait_seconds_total", map[string]string{"backend": "aws-1", "api": "elbv2"})
		for i := range 50 {
			if _, err := c.lb.elb.DescribeLoadBalancers(context.Background(), &elbv2.DescribeLoadBalancersInput{}); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
		}
		return testutil.CounterSum(t, "multicloud_ccm_cloud_api_budget_wait_seconds_total", map[string]string{"backend": "aws-1", "api": "elbv2"}) - before
	}
	e := newEnv(t, defaultBudget)
	if def := cloudapi.AWSDefaults[cloudapi.APIELBv2]; def.QPS != 10 || def.Bucket != 39 {
		t.Fatalf("the ELBv2 default is %+v, want AWS's 40 tokens at 10 a second, less the one token of margin", def)
	}
	if waited := burst(e.cloud); waited < 0.5 {
		t.Errorf("50 reads over the default bucket of 39 at 10 a second waited %.2fs in all, want about 1s", waited)
	}
	if waited := burst(buildCloud(t, e.url, func(s *Settings) { s.RateLimits = budgetOff })); waited != 0 {
		t.Errorf("with the budget off the reads waited %.2fs", waited)
	}
}

func throttledCount(t *testing.T) float64 {
	t.Helper()
	return testutil.CounterSum(t, "multicloud_ccm_cloud_api_throttled_total", nil)
}

// TestBackendsOfOneAccountShareTheBudget: AWS throttles per account and
// region, so two aws backends with the same credentials and region (here
// the same fake) take their tokens from one budget: with the EC2 read
// bucket at one token, the second backend's lookup finds it spent by the
// first's. Before, each had a bucket of its own, together twice the share.
// A backend of other credentials has its own. The config refuses two such
// backends with different rateLimits, naming both.
func TestBackendsOfOneAccountShareTheBudget(t *testing.T) {
	e := newEnv(t)
	in := e.addInstance(1)
	oneToken := func(s *Settings) {
		s.RateLimits = map[string]cloudapi.RateLimit{cloudapi.APIEC2: {QPS: 0.001, Bucket: 1}}
	}
	first, second := buildCloud(t, e.url, oneToken), buildCloud(t, e.url, oneToken)
	node := newNode("n", testutil.WithProviderID(providerID(in.Zone, in.ID)))
	// A generous deadline: the budget refuses at once a wait past it (the
	// next token comes in 1,000 s), so the second lookup fails without
	// waiting, and a loaded machine cannot fail the first.
	lookup := func(c *Cloud) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		inst, _ := c.InstancesV2()
		_, err := inst.InstanceMetadata(ctx, node)
		return err
	}
	if err := lookup(first); err != nil {
		t.Fatalf("the first backend's lookup: %v", err)
	}
	if err := lookup(second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the second backend of the account, its bucket spent by the first = %v, want the lookup's deadline (no token left)", err)
	}
	t.Setenv("TEST_AWS_KEY2", "AKIDOTHER")
	other := buildCloud(t, e.url, oneToken, func(s *Settings) {
		s.Credentials = &StaticCredentials{AccessKeyID: config.SecretRef{Env: "TEST_AWS_KEY2"}, SecretAccessKey: config.SecretRef{Env: "TEST_AWS_SECRET"}}
	})
	if err := lookup(other); err != nil {
		t.Errorf("a backend of other credentials: %v", err)
	}

	a, b := &Settings{Region: "eu-west-1"}, &Settings{Region: "eu-west-1", RateLimits: map[string]cloudapi.RateLimit{cloudapi.APIEC2: {QPS: 20}}}
	p := field.NewPath("backends")
	errs := checkBudgetsAcross([]config.Section{{Backend: "aws-a", Path: p.Index(0).Child("aws"), Settings: a}, {Backend: "aws-b", Path: p.Index(1).Child("aws"), Settings: b}})
	if len(errs) != 1 || !strings.Contains(errs.ToAggregate().Error(), `backends[1].aws.rateLimits`) || !strings.Contains(errs.ToAggregate().Error(), `"aws-a"`) {
		t.Errorf("two backends of one account with different rateLimits: %v", errs)
	}
	// The default mode said or left out is the same budget: accepted, and
	// shared.
	modeSaid := &Settings{Region: "eu-west-1", RateLimits: map[string]cloudapi.RateLimit{cloudapi.APIEC2: {QPS: 20, Mode: cloudapi.ModeAdaptive}}}
	if errs := checkBudgetsAcross([]config.Section{{Backend: "aws-b", Path: p.Index(0).Child("aws"), Settings: b}, {Backend: "aws-c", Path: p.Index(1).Child("aws"), Settings: modeSaid}}); len(errs) != 0 {
		t.Errorf("the default mode said in one and left out in the other: %v", errs)
	}
	if sharedBudgetKey(b) != sharedBudgetKey(modeSaid) {
		t.Errorf("the default mode said or left out: two budget keys %q and %q", sharedBudgetKey(b), sharedBudgetKey(modeSaid))
	}
	modeSaid.RateLimits[cloudapi.APIEC2] = cloudapi.RateLimit{QPS: 20, Mode: cloudapi.ModeFixed}
	if errs := checkBudgetsAcross([]config.Section{{Backend: "aws-b", Path: p.Index(0).Child("aws"), Settings: b}, {Backend: "aws-c", Path: p.Index(1).Child("aws"), Settings: modeSaid}}); len(errs) != 1 {
		t.Errorf("adaptive beside fixed in one account: %v, want one error", errs)
	}
	b.Region = "us-east-1"
	if errs := checkBudgetsAcross([]config.Section{{Backend: "aws-a", Path: p.Index(0).Child("aws"), Settings: a}, {Backend: "aws-b", Path: p.Index(1).Child("aws"), Settings: b}}); len(errs) != 0 {
		t.Errorf("two regions: %v", errs)
	}
}
