package cloudapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
)

// TestMutationGateEachAWSAttempt: the SDK's retryer sends a throttled
// mutation again; each attempt is put to the gate, so a retry after the
// lease ran out is refused and never reaches AWS (the gate is not only
// asked for the first attempt).
func TestMutationGateEachAWSAttempt(t *testing.T) {
	var asked atomic.Int64
	old := SetMutationGate(func(context.Context) error {
		if asked.Add(1) >= 2 { // open for the first attempt only
			return errDeposed
		}
		return nil
	})
	t.Cleanup(func() { SetMutationGate(old) })
	fake := awsfake.New("eu-west-1")
	srv := httptest.NewServer(fake)
	defer srv.Close()
	fake.Throttle(1)
	c := elbClient(srv.URL, NewBudget("gate-retry", nil, AWSDefaults))
	_, err := c.CreateTargetGroup(context.Background(), &elbv2.CreateTargetGroupInput{Name: new("tg")})
	if !errors.Is(err, ErrMutationRefused) {
		t.Fatalf("a retry after the gate closed: %v, want ErrMutationRefused", err)
	}
	if n := fake.Attempts("CreateTargetGroup"); n != 1 {
		t.Errorf("AWS got %d attempts of CreateTargetGroup, want 1 (the throttled one; the retry refused)", n)
	}
	if m := fake.MutatingRequests(); len(m) != 1 {
		t.Errorf("AWS recorded mutating requests %v, want the one throttled attempt", m)
	}
}

// TestMutationGateBudgetOff: a budget turned off (rateLimits qps and
// qpsWrite -1, as a reload may set) and no budget at all still put every
// mutation to the gate: "off" is about rates, not about the fence.
func TestMutationGateBudgetOff(t *testing.T) {
	var closed atomic.Bool
	closed.Store(true)
	setGate(t, &closed)
	off := map[string]RateLimit{}
	for api := range AWSDefaults {
		off[api] = RateLimit{QPS: Off, QPSWrite: Off}
	}
	ctx := context.Background()
	for name, b := range map[string]*Budget{
		"off":        NewBudget("gate-off", off, AWSDefaults),
		"shared off": NewSharedBudget("gate-off-shared", "gate-off-key", off, AWSDefaults),
		"nil":        nil,
	} {
		if err := b.Wait(ctx, APIELBv2, true); !errors.Is(err, ErrMutationRefused) {
			t.Errorf("%s budget, gate closed: a write got %v, want ErrMutationRefused", name, err)
		}
		if err := b.Wait(ctx, APIELBv2, false); err != nil {
			t.Errorf("%s budget, gate closed: a read got %v, want it to pass", name, err)
		}
	}
}

// TestWriteWaitEndsWithCtx: a write waiting for its token returns when
// its context ends (wrapping the context's error) and gives the
// reservation back; one whose token comes after its deadline is refused
// at once with ErrPastDeadline.
func TestWriteWaitEndsWithCtx(t *testing.T) {
	var closed atomic.Bool
	setGate(t, &closed)
	b := NewBudget("gate-ctx", map[string]RateLimit{APIELBv2: {QPSWrite: 1, BucketWrite: 1, Mode: ModeFixed}}, AWSDefaults)
	if err := b.Wait(context.Background(), APIELBv2, true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := b.Wait(ctx, APIELBv2, true); !errors.Is(err, ErrPastDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a write whose token comes after its deadline: %v, want ErrPastDeadline", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx2, APIELBv2, true) }()
	time.Sleep(20 * time.Millisecond)
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("a write whose context ended while it waited: %v, want context.Canceled", err)
	}
}

// TestTransportUnknownAPIMutationGated: a mutating request under no
// endpoint the Transport knows (no DefaultAPI; a service missing from the
// catalog) is still put to the mutation gate and sends nothing; a
// session's request (a Keystone login) and a read under no endpoint pass.
func TestTransportUnknownAPIMutationGated(t *testing.T) {
	var closed atomic.Bool
	closed.Store(true)
	setGate(t, &closed)
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got.Add(1) }))
	defer srv.Close()
	tr := &Transport{Budget: NewBudget("gate-unknown", nil, nil), Session: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/auth/tokens") }}
	tr.SetEndpoints([]Endpoint{{Prefix: srv.URL + "/compute/", API: "compute"}})
	c := &http.Client{Transport: tr}
	resp, err := c.Post(srv.URL+"/v2/lbaas/loadbalancers", "application/json", strings.NewReader(`{}`))
	if err == nil {
		_ = resp.Body.Close()
	}
	if !errors.Is(err, ErrMutationRefused) || got.Load() != 0 {
		t.Fatalf("a POST under no known endpoint with the gate closed: %v, server got %d requests; want ErrMutationRefused and none", err, got.Load())
	}
	for _, req := range []func() (*http.Response, error){
		func() (*http.Response, error) { return c.Get(srv.URL + "/v3") },
		func() (*http.Response, error) {
			return c.Post(srv.URL+"/v3/auth/tokens", "application/json", strings.NewReader(`{}`))
		},
	} {
		resp, err := req()
		if err != nil {
			t.Fatalf("a read or a login under no known endpoint with the gate closed: %v", err)
		}
		_ = resp.Body.Close()
	}
	if n := got.Load(); n != 2 {
		t.Errorf("the server got %d requests, want 2 (the read and the login)", n)
	}
}
