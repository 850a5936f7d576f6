package upstreamaws

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	ours "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// budgetProxy puts a client-side API budget in front of the fake for a
// provider that has none of its own (upstream's): the same buckets as our
// backend's (cloudapi.Budget, AWS's defaults unless retuned), the same
// classification (cloudapi.AWSMutating), one token per HTTP request, as
// our SDK middleware takes one per attempt. The API is read from the
// request's signature scope (ec2, elasticloadbalancing) and Version
// (ELBv2's 2015-12-01; classic ELB has no budget), the action from its
// Query-protocol form.
type budgetProxy struct {
	budget *cloudapi.Budget // nil: none (ours keeps its own)
	next   *httputil.ReverseProxy

	mu     sync.Mutex
	counts map[string]int // action -> requests
}

// take returns and resets the requests counted by action.
func (p *budgetProxy) take() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.counts
	p.counts = map[string]int{}
	return out
}

func newBudgetProxy(tb testing.TB, target string, limits map[string]cloudapi.RateLimit) (*budgetProxy, string) {
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	p := &budgetProxy{next: httputil.NewSingleHostReverseProxy(u), counts: map[string]int{}}
	if limits != nil {
		p.budget = cloudapi.NewBudget("upstream-proxy", limits, cloudapi.AWSDefaults)
	}
	srv := httptest.NewServer(p)
	tb.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *budgetProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	api := ""
	switch scope := r.Header.Get("Authorization"); {
	case strings.Contains(scope, "/ec2/aws4_request"):
		api = cloudapi.APIEC2
	case strings.Contains(scope, "/elasticloadbalancing/aws4_request") && form.Get("Version") == "2015-12-01":
		api = cloudapi.APIELBv2
	}
	p.mu.Lock()
	p.counts[form.Get("Action")]++
	p.mu.Unlock()
	if api != "" && p.budget != nil {
		if err := p.budget.WaitAction(r.Context(), api, form.Get("Action"), cloudapi.AWSMutating(form.Get("Action"))); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	p.next.ServeHTTP(w, r)
}

// nodeSyncSize is NODESYNC_NLBS (default 100): the NLBs each provider
// makes in BenchmarkNodeSyncUnderBudget.
func nodeSyncSize(b *testing.B) int {
	n := 100
	if v := os.Getenv("NODESYNC_NLBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("NODESYNC_NLBS: %q is not a positive count", v)
		}
	}
	return n
}

// BenchmarkNodeSyncUnderBudget is the node sync of issue #42 for
// upstream's provider and ours, on one fake, with the same client-side
// budget: each provider creates NODESYNC_NLBS NLBs (one port, instance
// targets, over 100 nodes, no rule in the nodes' security group on
// either side) with its budget off, then the budget is
// switched to AWS's defaults the same way for both (cloudapi.Budget.Retune:
// ours through a live reload's retune, PrepareRetune; upstream's in the
// budget proxy in front of it), and one node is excluded: UpdateLoadBalancer
// of every Service without it, 10 at a time (--concurrent-service-syncs
// of the chart; upstream's service controller's node sync runs its
// workers the same way). It reports the seconds until every NLB was
// updated, their ratio to the write budget's time for the target groups
// that change (one per NLB: the first 10 from the bucket, then 1 a
// second), and the calls by operation (count and per NLB). Ours first, then
// upstream's, so the fake's counts are each one's. -benchtime 1x.
func BenchmarkNodeSyncUnderBudget(b *testing.B) {
	n := nodeSyncSize(b)
	e := newEnv(b, 100)
	off := map[string]cloudapi.RateLimit{cloudapi.APIEC2: {QPS: cloudapi.Off, QPSWrite: cloudapi.Off}, cloudapi.APIELBv2: {QPS: cloudapi.Off, QPSWrite: cloudapi.Off}}
	proxy, proxyURL := newBudgetProxy(b, e.url, off)
	// Neither provider adds rules to the nodes' security group (the
	// fake keeps AWS's default quota of 60 rules a group): 2 × N
	// instance-target NLBs cannot each open the NodePort in one group
	// (AWS's maximum is 1,000 rules), and the node sync measured writes
	// no rule on either side. Ours by the Service annotation,
	// upstream's by its cloud-config's DisableSecurityGroupIngress
	// (v1.37.1 does not read the annotation; the option skips its
	// updateInstanceSecurityGroupsForNLB, rules and reads alike).
	upstream := upstreamCloud(b, proxyURL, e.seeded.VPCID, e.seeded.PrivateSubnets[0], "DisableSecurityGroupIngress = true")
	offJSON := `"rateLimits": {"ec2": {"qps": -1, "qpsWrite": -1}, "elbv2": {"qps": -1, "qpsWrite": -1}}`
	// Ours through a proxy too, without a budget (it has its own), to
	// count its requests apart: both node syncs run at once.
	mineProxy, mineURL := newBudgetProxy(b, e.url, nil)
	mine := ourCloud(b, mineURL, e.seeded.VPCID, offJSON)
	nodes := e.nodes()
	rest := nodes[1:]
	svcs := func(prefix string) []*v1.Service {
		out := make([]*v1.Service, n)
		for i := range out {
			out[i] = nlbService(fmt.Sprintf("%s%04d", prefix, i), 80)
		}
		return out
	}
	mineSvcs, upSvcs := svcs("ours"), svcs("up")
	for _, s := range mineSvcs {
		s.Annotations[string(ours.AnnotationManageBackendSGRules)] = "false"
	}
	nodeRules := e.fake.SecurityGroupIngress(e.seeded.NodeSecurityGroup)
	ctx := context.Background()
	var retries atomic.Int64
	each := func(lb cloudprovider.LoadBalancer, ss []*v1.Service, f func(cloudprovider.LoadBalancer, *v1.Service) error) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		work := make(chan *v1.Service)
		for range 10 {
			wg.Go(func() {
				for s := range work {
					// As the service controller, retry a failed sync
					// (upstream's concurrent creations race on the nodes'
					// security group: InvalidPermission.Duplicate).
					var err error
					for try := range 5 {
						if err = f(lb, s); err == nil {
							break
						}
						retries.Add(1)
						time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
					}
					if err != nil {
						b.Errorf("%s: %v", s.Name, err)
					}
				}
			})
		}
		for _, s := range ss {
			work <- s
		}
		close(work)
		wg.Wait()
		return time.Since(start)
	}
	ensure := func(lb cloudprovider.LoadBalancer, s *v1.Service) error {
		_, err := lb.EnsureLoadBalancer(ctx, clusterID, s, nodes)
		return err
	}
	update := func(lb cloudprovider.LoadBalancer, s *v1.Service) error {
		return lb.UpdateLoadBalancer(ctx, clusterID, s, rest)
	}
	mineLB, _ := mine.LoadBalancer()
	upLB, _ := upstream.LoadBalancer()
	for b.Loop() {
		b.Logf("created %d NLBs each, budget off: ours in %v, upstream's in %v", n,
			each(mineLB, mineSvcs, ensure).Round(time.Millisecond), each(upLB, upSvcs, ensure).Round(time.Millisecond))
		if b.Failed() {
			b.FailNow()
		}
		if got := e.fake.SecurityGroupIngress(e.seeded.NodeSecurityGroup); !slices.Equal(got, nodeRules) {
			b.Fatalf("the nodes' security group %s has rules %v after the creations, want its seeded %v", e.seeded.NodeSecurityGroup, got, nodeRules)
		}
		// The budget on, AWS's defaults, for both.
		settings, errs := ours.ParseSection(fmt.Appendf(nil, `{"region": %q, "vpc": %q, "endpoints": {"ec2": %q, "elbv2": %q, "sts": %q},
			"credentials": {"accessKeyID": {"env": "OURS_AWS_KEY"}, "secretAccessKey": {"env": "OURS_AWS_SECRET"}}}`,
			region, e.seeded.VPCID, mineURL, mineURL, mineURL), field.NewPath("aws"), b.TempDir())
		if len(errs) > 0 {
			b.Fatal(errs.ToAggregate())
		}
		apply, ok, err := mine.(interface {
			PrepareRetune(context.Context, backends.Options) (func(), bool, error)
		}).PrepareRetune(ctx, backends.Options{Name: "aws", ClusterID: clusterID, Settings: settings})
		if err != nil || !ok {
			b.Fatalf("our retune: %v, %v", ok, err)
		}
		apply()
		proxy.budget.Retune("", nil, cloudapi.AWSDefaults)

		if left := groupsWith(e, e.seeded.Instances[0].ID); left != 2*n {
			b.Fatalf("before the node sync %d target groups have the node, want %d", left, 2*n)
		}
		writeBudget := float64(max(0, n-cloudapi.AWSDefaults[cloudapi.APIELBv2].BucketWrite)) / cloudapi.AWSDefaults[cloudapi.APIELBv2].QPSWrite
		type run struct {
			name  string
			lb    cloudprovider.LoadBalancer
			ss    []*v1.Service
			proxy *budgetProxy
			took  time.Duration
		}
		runs := []*run{{name: "ours", lb: mineLB, ss: mineSvcs, proxy: mineProxy}, {name: "upstream", lb: upLB, ss: upSvcs, proxy: proxy}}
		retries.Store(0)
		var wg sync.WaitGroup
		for _, r := range runs {
			r.proxy.take()
			wg.Go(func() {
				r.took = each(r.lb, r.ss, update)
				b.Logf("%s: every NLB updated after %.1f s", r.name, r.took.Seconds())
			})
		}
		wg.Wait()
		if left := groupsWith(e, e.seeded.Instances[0].ID); left != 0 {
			b.Errorf("after both node syncs %d target groups still have the excluded node", left)
		}
		for _, r := range runs {
			var ops []string
			total := 0
			for op, c := range r.proxy.take() {
				ops = append(ops, fmt.Sprintf("%s %d (%.2f)", op, c, float64(c)/float64(n)))
				total += c
			}
			slices.Sort(ops)
			b.Logf("%s: node sync of %d NLBs under the default budget in %.1f s (the write budget's time for %d changed target groups: %.0f s, ratio %.3f); %d requests, %.2f per NLB: %s",
				r.name, n, r.took.Seconds(), n, writeBudget, r.took.Seconds()/writeBudget, total, float64(total)/float64(n), strings.Join(ops, ", "))
			b.ReportMetric(r.took.Seconds(), r.name+"-sync-s")
			b.ReportMetric(float64(total)/float64(n), r.name+"-calls/NLB")
		}
		b.Logf("failed syncs retried (both): %d", retries.Load())
	}
	b.ReportMetric(0, "ns/op")
}

// groupsWith counts the target groups that have instance id as a target.
func groupsWith(e *env, id string) int {
	n := 0
	for _, tg := range e.fake.TargetGroups() {
		if slices.ContainsFunc(tg.Targets, func(t string) bool { return strings.HasPrefix(t, id+":") }) {
			n++
		}
	}
	return n
}
