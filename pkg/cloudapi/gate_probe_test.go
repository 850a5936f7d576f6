package cloudapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"

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
