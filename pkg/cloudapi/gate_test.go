package cloudapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// errDeposed is what the tests' gate answers when it is closed.
var errDeposed = errors.New("deposed")

// setGate installs a gate that refuses while *closed, counting its calls,
// and restores the previous gate when the test ends.
func setGate(t *testing.T, closed *atomic.Bool) *atomic.Int64 {
	t.Helper()
	var calls atomic.Int64
	old := SetMutationGate(func(context.Context) error {
		calls.Add(1)
		if closed.Load() {
			return errDeposed
		}
		return nil
	})
	t.Cleanup(func() { SetMutationGate(old) })
	return &calls
}

// TestMutationGateRefusesWritesOnly: with the gate closed a write is
// refused with ErrMutationRefused (and the gate's own error), counted by
// backend and api; a read and a session's write pass; with the gate open
// a write passes.
func TestMutationGateRefusesWritesOnly(t *testing.T) {
	var closed atomic.Bool
	setGate(t, &closed)
	b := NewBudget("gate-writes", nil, AWSDefaults)
	ctx := context.Background()
	if err := b.Wait(ctx, APIELBv2, true); err != nil {
		t.Fatalf("open gate: write refused: %v", err)
	}
	closed.Store(true)
	before := testutil.CounterSum(t, "multicloud_ccm_fence_refused_cloud_calls_total", map[string]string{"backend": "gate-writes", "api": APIELBv2})
	err := b.Wait(ctx, APIELBv2, true)
	if !errors.Is(err, ErrMutationRefused) || !errors.Is(err, errDeposed) {
		t.Fatalf("closed gate: write got %v, want ErrMutationRefused wrapping the gate's error", err)
	}
	if !strings.Contains(err.Error(), `"gate-writes"`) || !strings.Contains(err.Error(), APIELBv2) {
		t.Errorf("the refusal %q names neither the backend nor the api", err)
	}
	after := testutil.CounterSum(t, "multicloud_ccm_fence_refused_cloud_calls_total", map[string]string{"backend": "gate-writes", "api": APIELBv2})
	if after-before != 1 {
		t.Errorf("refused_cloud_calls_total rose by %v, want 1", after-before)
	}
	if err := b.Wait(ctx, APIELBv2, false); err != nil {
		t.Errorf("closed gate: read refused: %v", err)
	}
	if err := b.WaitSession(ctx, APIELBv2, ""); err != nil {
		t.Errorf("closed gate: session write refused: %v", err)
	}
	if err := SetMutationGate(nil); err == nil {
		t.Fatal("SetMutationGate returned no previous gate")
	}
	if err := b.Wait(ctx, APIELBv2, true); err != nil {
		t.Errorf("no gate: write refused: %v", err)
	}
}

// TestMutationGateAfterTokenWait: a write that waits for its token is put
// to the gate again once it has it: the lease may have run out meanwhile;
// refused then, it keeps its token (TestRefusedWriteKeepsItsToken before).
func TestMutationGateAfterTokenWait(t *testing.T) {
	var closed atomic.Bool
	calls := setGate(t, &closed)
	b := NewBudget("gate-wait", map[string]RateLimit{APIELBv2: {QPSWrite: 5, BucketWrite: 1, Mode: ModeFixed}}, AWSDefaults)
	ctx := context.Background()
	if err := b.Wait(ctx, APIELBv2, true); err != nil { // the bucket's one token
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx, APIELBv2, true) }()
	for calls.Load() < 2 { // the second write passed the gate and waits for its token
		time.Sleep(time.Millisecond)
	}
	closed.Store(true)
	if err := <-done; !errors.Is(err, ErrMutationRefused) {
		t.Fatalf("a write whose lease ran out while it waited for its token got %v, want ErrMutationRefused", err)
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("gate asked %d times, want 3 (once for the first write, before and after the second's wait)", got)
	}
	// The refused write sent nothing and gives its token back: the next
	// write (the gate open again: a slow renewal that succeeded) takes it
	// at once instead of waiting a token's time more.
	if tok := b.bucket(APIELBv2, "", true).lim.Tokens(); tok < 0.5 {
		t.Errorf("after a write refused when its token came, the bucket holds %.2f tokens, want 1: the refused call spent one", tok)
	}
	closed.Store(false)
	if !b.bucket(APIELBv2, "", true).lim.Allow() {
		t.Error("the gate open again, the next write has no token at once")
	}
}

// TestTransportRefusedSendsNothing: over HTTP (OpenStack, vCenter's vAPI)
// a refused mutation never reaches the server and is not counted as a
// call; reads and session requests do.
func TestTransportRefusedSendsNothing(t *testing.T) {
	var closed atomic.Bool
	closed.Store(true)
	setGate(t, &closed)
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
	}))
	defer srv.Close()
	tr := &Transport{Budget: NewBudget("gate-http", nil, map[string]RateLimit{"load-balancer": {QPS: Off, QPSWrite: Off}}),
		DefaultAPI: "load-balancer", Session: func(r *http.Request) bool { return r.URL.Path == "/session" }}
	c := &http.Client{Transport: tr}
	callsBefore := testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", map[string]string{"backend": "gate-http"})
	resp, err := c.Post(srv.URL+"/loadbalancers", "application/json", strings.NewReader(`{}`))
	if err == nil {
		_ = resp.Body.Close()
	}
	if !errors.Is(err, ErrMutationRefused) {
		t.Fatalf("POST with the gate closed: %v, want ErrMutationRefused", err)
	}
	for _, req := range []func() (*http.Response, error){
		func() (*http.Response, error) { return c.Get(srv.URL + "/loadbalancers") },
		func() (*http.Response, error) {
			return c.Post(srv.URL+"/session", "application/json", strings.NewReader(`{}`))
		},
	} {
		resp, err := req()
		if err != nil {
			t.Fatalf("a read or a session's request with the gate closed: %v", err)
		}
		_ = resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"GET /loadbalancers", "POST /session"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the server got %q, want %q: the refused POST must send nothing", got, want)
	}
	if n := testutil.CounterSum(t, "multicloud_ccm_cloud_api_calls_total", map[string]string{"backend": "gate-http"}) - callsBefore; n != 2 {
		t.Errorf("calls_total rose by %v, want 2 (the refused call was not made)", n)
	}
}

// TestAWSRefusedSendsNothing: through the SDK's middleware a refused
// mutation reaches the wire fake in no attempt (the SDK's retryer does
// not retry a refusal); reads still do.
func TestAWSRefusedSendsNothing(t *testing.T) {
	var closed atomic.Bool
	closed.Store(true)
	setGate(t, &closed)
	fake := awsfake.New("eu-west-1")
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := elbClient(srv.URL, NewBudget("gate-aws", nil, AWSDefaults))
	ctx := context.Background()
	_, err := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: new("tg")})
	if !errors.Is(err, ErrMutationRefused) {
		t.Fatalf("CreateTargetGroup with the gate closed: %v, want ErrMutationRefused", err)
	}
	if _, err := c.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{}); err != nil {
		t.Fatalf("a read with the gate closed: %v", err)
	}
	if m := fake.MutatingRequests(); len(m) != 0 {
		t.Errorf("the fake got mutating requests %v, want none", m)
	}
	if n := fake.TotalAttempts(); n != 1 {
		t.Errorf("the fake got %d requests, want 1 (the read)", n)
	}
	closed.Store(false)
	if _, err := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: new("tg")}); err != nil && errors.Is(err, ErrMutationRefused) {
		t.Fatalf("open gate: %v", err)
	}
	if m := fake.MutatingRequests(); len(m) != 1 || m[0].Action != "CreateTargetGroup" || m[0].AccessKey != "AKIDFAKE" {
		t.Errorf("open gate: the fake recorded %+v, want one CreateTargetGroup signed by AKIDFAKE", m)
	}
}

// TestLandingAfterTakeover: a change the previous leader sent may land up
// to window after the takeover; without a takeover clock, or while the
// clock says none (created the lease, or not leading), nothing may.
func TestLandingAfterTakeover(t *testing.T) {
	var since atomic.Pointer[time.Time]
	zero := time.Time{}
	since.Store(&zero)
	old := SetTakeover(func() time.Time { return *since.Load() })
	t.Cleanup(func() { SetTakeover(old) })

	if got := LandingAfterTakeover(30 * time.Second); !got.IsZero() {
		t.Errorf("no takeover: %v, want zero", got)
	}
	took := time.Now().Add(-10 * time.Second)
	since.Store(&took)
	if got, want := LandingAfterTakeover(30*time.Second), took.Add(30*time.Second); !got.Equal(want) {
		t.Errorf("10 s after a takeover, window 30 s: %v, want %v", got, want)
	}
	if got := LandingAfterTakeover(5 * time.Second); !got.IsZero() {
		t.Errorf("10 s after a takeover, window 5 s: %v, want zero (passed)", got)
	}
	SetTakeover(nil)
	if got := LandingAfterTakeover(30 * time.Second); !got.IsZero() {
		t.Errorf("without a takeover clock: %v, want zero", got)
	}
}
