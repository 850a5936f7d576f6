package vsphere

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// callDeltas reads calls_total{action} by outcome and throttled_total of
// the test backend's vcenter API, and returns a func giving how much each
// grew since: throttled attempts, successes, errors, throttled_total.
func callDeltas(t testing.TB, keep func(string) bool) func() [4]float64 {
	t.Helper()
	read := func() [4]float64 {
		return [4]float64{
			apiCalls(t, cloudapi.OutcomeThrottled, keep),
			apiCalls(t, cloudapi.OutcomeSuccess, keep),
			apiCalls(t, cloudapi.OutcomeError, keep),
			testutil.CounterSum(t, "multicloud_ccm_cloud_api_throttled_total", map[string]string{"backend": "onprem", "api": cloudapi.APIVCenter}),
		}
	}
	before := read()
	return func() [4]float64 {
		now := read()
		for i := range now {
			now[i] -= before[i]
		}
		return now
	}
}

// TestSOAPThrottledReadRetried: a SOAP read answered 429 (or 503) is
// retried with backoff: a burst of 429s on the property collector while
// InstanceExists logs in and retrieves the inventory is true, not an
// error (and never false); the power-state read of InstanceShutdown
// answered 429 three times, then 503 twice, is true after K throttled
// attempts and one success, each counted, and only the success reached
// vCenter.
func TestSOAPThrottledReadRetried(t *testing.T) {
	s := startSim(t)
	vms := s.vms(t, "DC0")
	s.powerOff(t, vms[0])
	node := newNode("a", withVM(vms[0]))

	rule := s.throttleNext(t, 3, &throttleRule{Status: http.StatusTooManyRequests, Method: "RetrievePropertiesEx"})
	c := newCloud(t, []*sim{s})
	if ok, err := c.InstanceExists(context.Background(), node); err != nil || !ok {
		t.Fatalf("InstanceExists during 3 answers 429 of the property collector = %v, %v; want true", ok, err)
	}
	if got := rule.Answered.Load(); got != 3 {
		t.Fatalf("the proxy answered %d calls 429, want 3", got)
	}

	for _, tc := range []struct {
		status, k int
	}{{http.StatusTooManyRequests, 3}, {http.StatusServiceUnavailable, 2}} {
		delta := callDeltas(t, action("RetrievePropertiesEx"))
		reached := s.requests.Load()
		rule := s.throttleNext(t, tc.k, &throttleRule{Status: tc.status, Method: "RetrievePropertiesEx"})
		if off, err := c.InstanceShutdown(context.Background(), node); err != nil || !off {
			t.Fatalf("InstanceShutdown of a VM powered off, its power-state read answered %d %d times = %v, %v; want true", tc.status, tc.k, off, err)
		}
		want := [4]float64{float64(tc.k), 1, 0, float64(tc.k)}
		if got := delta(); got != want || rule.Answered.Load() != int64(tc.k) {
			t.Errorf("after %d answers %d: calls_total{RetrievePropertiesEx} throttled/success/error and throttled_total grew by %v, want %v (proxy answered %d)", tc.k, tc.status, got, want, rule.Answered.Load())
		}
		if got := s.requests.Load() - reached; got != 1 {
			t.Errorf("%d requests reached vcsim, want the one power-state read", got)
		}
	}
}

// TestSOAPThrottleBurstNeverGone: when every attempt is throttled (429
// with Retry-After: 0, so the test waits for nothing), InstanceExists and
// InstanceShutdown return an error after 1 + cloudapi.DefaultHTTPRetries
// attempts of the call, never "gone" (false).
func TestSOAPThrottleBurstNeverGone(t *testing.T) {
	s := startSim(t)
	vms := s.vms(t, "DC0")
	s.powerOff(t, vms[0])
	node := newNode("a", withVM(vms[0]))
	attempts := int64(1 + cloudapi.DefaultHTTPRetries)

	c := newCloud(t, []*sim{s})
	if off, err := c.InstanceShutdown(context.Background(), node); err != nil || !off {
		t.Fatalf("InstanceShutdown = %v, %v", off, err)
	}
	rule := s.throttleNext(t, 1000, &throttleRule{Status: http.StatusTooManyRequests, RetryAfter: "0", Method: "RetrievePropertiesEx"})
	if off, err := c.InstanceShutdown(context.Background(), node); err == nil {
		t.Errorf("InstanceShutdown with every power-state read throttled = %v, nil; want an error", off)
	}
	if got := rule.Answered.Load(); got != attempts {
		t.Errorf("the power-state read was sent %d times, want %d", got, attempts)
	}

	fresh := newCloud(t, []*sim{s})
	ok, err := fresh.InstanceExists(context.Background(), node)
	if err == nil {
		t.Errorf("InstanceExists with the property collector throttled = %v, nil; want an error, never false", ok)
	}
	if got := rule.Answered.Load() - attempts; got != attempts {
		t.Errorf("InstanceExists sent its throttled read %d times, want %d", got, attempts)
	}
}

// TestSOAPThrottledChangeNotRetried: a Login (a change) answered 503 may
// have been half done: it is returned to the caller, not sent again; a
// Login answered 429 (refused unprocessed) is retried and the node's VM
// found.
func TestSOAPThrottledChangeNotRetried(t *testing.T) {
	s := startSim(t)
	vms := s.vms(t, "DC0")
	node := newNode("a", withVM(vms[0]))

	delta := callDeltas(t, action("Login"))
	rule := s.throttleNext(t, 1, &throttleRule{Status: http.StatusServiceUnavailable, Method: "Login"})
	if ok, err := newCloud(t, []*sim{s}).InstanceExists(context.Background(), node); err == nil {
		t.Errorf("InstanceExists with its login answered 503 = %v, nil; want the error (no retry)", ok)
	}
	if got, want := delta(), [4]float64{1, 0, 0, 1}; got != want || rule.Answered.Load() != 1 {
		t.Errorf("calls_total{Login} throttled/success/error and throttled_total grew by %v, want %v (proxy answered %d)", got, want, rule.Answered.Load())
	}

	delta = callDeltas(t, action("Login"))
	rule = s.throttleNext(t, 2, &throttleRule{Status: http.StatusTooManyRequests, Method: "Login"})
	if ok, err := newCloud(t, []*sim{s}).InstanceExists(context.Background(), node); err != nil || !ok {
		t.Errorf("InstanceExists with its login answered 429 twice = %v, %v; want true", ok, err)
	}
	if got, want := delta(), [4]float64{2, 1, 0, 2}; got != want || rule.Answered.Load() != 2 {
		t.Errorf("calls_total{Login} throttled/success/error and throttled_total grew by %v, want %v (proxy answered %d)", got, want, rule.Answered.Load())
	}
}

// TestSOAPThrottleRetryAfter: a SOAP read answered 429 with Retry-After
// is retried after the time asked for (1 s: longer than the first jittered
// backoff, at most 0.5 s); when that time would pass the caller's deadline
// the error is returned at once, not after waiting, and not as "gone".
func TestSOAPThrottleRetryAfter(t *testing.T) {
	s := startSim(t)
	vms := s.vms(t, "DC0")
	s.powerOff(t, vms[0])
	node := newNode("a", withVM(vms[0]))
	c := newCloud(t, []*sim{s})
	if off, err := c.InstanceShutdown(context.Background(), node); err != nil || !off {
		t.Fatalf("InstanceShutdown = %v, %v", off, err)
	}

	s.throttleNext(t, 1, &throttleRule{Status: http.StatusTooManyRequests, RetryAfter: "1", Method: "RetrievePropertiesEx"})
	start := time.Now()
	if off, err := c.InstanceShutdown(context.Background(), node); err != nil || !off {
		t.Fatalf("InstanceShutdown after one 429 with Retry-After: 1 = %v, %v; want true", off, err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("the retry came %v after a 429 asking for 1s", took)
	}

	rule := s.throttleNext(t, 1000, &throttleRule{Status: http.StatusTooManyRequests, RetryAfter: "30", Method: "RetrievePropertiesEx"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start = time.Now()
	off, err := c.InstanceShutdown(ctx, node)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "429") {
		t.Errorf("InstanceShutdown throttled with Retry-After: 30 under a 2s deadline = %v, %v; want the 429", off, err)
	}
	if took >= 2*time.Second {
		t.Errorf("InstanceShutdown returned after %v, past its 2s deadline", took)
	}
	if got := rule.Answered.Load(); got != 1 {
		t.Errorf("the read was sent %d times, want once (the retry would pass the deadline)", got)
	}
}

// TestVAPIThrottleRetried: the tagging (vAPI) session goes through
// cloudapi.Transport, which retries 429s only of requests it can send
// again; its GETs and its login (govmomi gives them an unreplayable empty
// body) are retried too, so a burst of 429s while the categories are read
// still gives the node its zone.
func TestVAPIThrottleRetried(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	s.tag(t, "k8s-zone", "zone-a", "/DC0")
	s.tag(t, "k8s-region", "region-1", "/DC0")
	for _, path := range []string{"/cis/session", "/tagging/category"} {
		delta := callDeltas(t, func(a string) bool { return strings.Contains(a, path) })
		rule := s.throttleNext(t, 2, &throttleRule{Status: http.StatusTooManyRequests, RetryAfter: "0", VAPIPath: path})
		c := newCloud(t, []*sim{s}, withZones())
		md, err := c.InstanceMetadata(context.Background(), newNode("a", withVM(vms[0])))
		if err != nil || md.Zone != "zone-a" {
			t.Errorf("InstanceMetadata with %s answered 429 twice = %+v, %v; want zone-a", path, md, err)
		}
		if got := delta(); got[0] != 2 || got[1] < 1 || rule.Answered.Load() != 2 {
			t.Errorf("calls_total of %s throttled/success/error, throttled_total grew by %v, want 2 throttled then successes", path, got)
		}
	}
}

// TestSOAPBudgetRetries: soapBudget alone, over a RoundTripper answering
// as govmomi does for a 429 with Retry-After: 0: a read is sent 1 +
// DefaultHTTPRetries times, then the 429 is returned as it came.
func TestSOAPBudgetRetries(t *testing.T) {
	answer := &url.Error{Op: "POST", URL: "/sdk", Err: statusErr("429 Too Many Requests")}
	sent := 0
	rt := &soapBudget{
		Next: soapFunc(func(ctx context.Context, _, _ soap.HasFault) error {
			sent++
			ctx.Value(retryAfterKey{}).(*retryAfterHint).set(http.StatusTooManyRequests, "0")
			return answer
		}),
		Budget: cloudapi.NewBudget("vc-test", nil, cloudapi.VCenterDefaults),
	}
	if err := rt.RoundTrip(context.Background(), &methods.RetrievePropertiesExBody{}, &methods.RetrievePropertiesExBody{}); !errors.Is(err, answer) {
		t.Errorf("RoundTrip = %v, want the 429", err)
	}
	if sent != 1+cloudapi.DefaultHTTPRetries {
		t.Errorf("the read was sent %d times, want %d", sent, 1+cloudapi.DefaultHTTPRetries)
	}
}
